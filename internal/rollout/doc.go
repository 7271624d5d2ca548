// Package rollout decides an OS image rollout's next wave: which Machines booting an
// OSImage's tag are asked to reimage to its newly published index now, so that no pool
// ever has more than maxUnavailable of them unavailable at once, and when a Machine that
// does not come back stops the rollout. It also spells the annotation by which a Machine
// is asked, for the OSImage controller that writes it and the poollet that reads it.
//
// It calls nothing and reads no clock: the OSImage controller gathers the Machines, calls
// Decide, asks the chosen ones and reports the plan. It must never do I/O.
package rollout
