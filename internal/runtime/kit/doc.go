// Package kit is the skeleton the runtimes that report machines made from API objects
// share (the metal runtime's Hosts, the broker's downstream Machines): how Run starts and
// Close stops (Lifecycle), the machines reported and the stream of their changes (Views),
// the Version answer (Base), how Run watches its objects (Lifecycle.Watch) and works
// through what its watches queue (Work). What each machine is made of, and every call that
// changes one, stays with each runtime.
package kit
