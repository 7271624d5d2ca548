// Package scheduler decides which MachinePool a Machine goes to. It is pure decision code:
// it reads a snapshot of pools, classes and namespaces, and the clock is passed in; it
// never calls the API or a runtime. The controller in internal/controller/scheduler feeds
// it from informers and applies its decisions.
//
// A decision is a list of small named filters (ready, taints, selector, tenancy,
// architecture, class, resources), each testable alone, then a score (spread or pack)
// with a deterministic tie-break. The Cache counts every bound Machine against its pool
// exactly once, including Machines assumed bound whose binding the API has not yet shown.
package scheduler
