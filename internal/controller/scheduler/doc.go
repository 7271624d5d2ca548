// Package scheduler is the controller that binds Machines to MachinePools. It keeps the
// decision package's Cache current from informers (pools, their Leases, classes,
// namespaces, bound Machines), asks it for a pool, and writes the result: one patch of
// spec.machinePoolRef per bound Machine, or a Scheduled=False condition saying why not.
//
// It never decides anything itself, never lists objects per reconcile, and never polls:
// unschedulable Machines are retried when something that could make them fit changes.
package scheduler
