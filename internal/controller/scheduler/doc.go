// Package scheduler is the controller that binds Machines to MachinePools. It keeps the
// decision package's Cache current from informers (pools, their Leases, classes,
// namespaces, bound Machines), asks it for a pool, and writes the result: one patch of
// spec.machinePoolRef per bound Machine, or a Scheduled=False condition saying why not.
// A Machine it bound and whose runtime refused it (Scheduled=False, RuntimeRefused) it
// takes back and records the refusal in the decision package's Queue; a user's pin stays.
//
// It never decides anything itself and holds no scheduling state (the Cache and the Queue
// do); it never lists objects per reconcile and never polls: unschedulable Machines are
// retried when something that could make them fit changes, or, for an outside clock (a
// refusal's backoff running out, a registry that did not answer), after a timed requeue.
package scheduler
