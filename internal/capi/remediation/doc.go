// Package remediation decides the next step of an AnvilRemediation (a MachineHealthCheck's
// request to bring one unhealthy machine back): which try to make — a reboot or a power
// cycle of the anvil Machine —, when to give up so Cluster API replaces the machine, and
// what the status records so a restarted provider goes on where it was.
//
// It calls nothing and reads no clock: the controller passes the time. It must never do I/O.
package remediation
