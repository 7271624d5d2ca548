// Package scheduler decides which MachinePool a Machine goes to. It is pure decision code:
// it reads a snapshot of pools, classes and namespaces, and the clock is passed in; it
// never calls the API or a runtime. The controller in internal/controller/scheduler feeds
// it from informers and applies its decisions, and holds no scheduling state of its own.
//
// A decision is a list of small named filters (ready, refused recently, architecture,
// class, selector, tenancy, taints, resources), each testable alone, then a score: the
// fewest untolerated PreferNoSchedule taints first, then the strategy (spread or pack),
// with a deterministic tie-break by name. The Cache counts every bound Machine against its
// pool exactly once, including Machines assumed bound whose binding the API has not yet
// shown. The Queue holds the Machines that wait for a change and the runtimes' refusals.
//
// Refusals are kept in memory only; a restarted manager forgets them. A refusal not yet
// acted on survives, because it is the Machine's Scheduled=False RuntimeRefused condition
// and the controller reads it back (level-based) and excludes the pool again. What is
// forgotten is the exclusion of a pool the Machine was already taken back from: the
// Machine may be bound to that pool once more, and is then refused again and sent on.
// That is safe, and what a user should expect: a refusal leaves nothing on the pool (the
// poollet hands the Machine back instead of creating it), the exclusion is only a hint
// that saves a round trip and ends after the backoff anyway, so a restart is an early end
// of the backoff, and the pool may well have room after the restart. Once taken back, a
// refusal shows only as prose in the Scheduled condition's message (the last one, until
// the Machine is bound elsewhere), too little to read back; keeping it would take a new
// status field written on every refusal, to save one bind per refused Machine per restart.
package scheduler
