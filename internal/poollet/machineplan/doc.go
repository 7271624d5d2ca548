// Package machineplan decides, for one Machine of a pool, what its poollet asks of the
// runtime and what it writes to the Machine: a pure function of the Machine, its runtime
// machine, what the pass has done so far, and the time. The poollet observes (its cache
// of the pool's Machines, the runtime's list under the Machine's name, what it remembers),
// asks Pass.Next for an Action, carries it out, records the outcome on the Pass, and asks
// again, until the Action ends the pass.
//
// Between passes the poollet remembers three things, each passed in and handed back:
// since when a runtime machine has lagged behind its spec (Lag), since when a Machine's
// first-boot Secret could not be read, and the resource version of its own last status
// write (internal/poollet keeps the last, since it guards the write itself).
package machineplan
