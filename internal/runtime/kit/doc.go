// Package kit is the skeleton the runtimes that report machines made from API objects
// share (the metal runtime's Hosts, the broker's downstream Machines): how Run starts and
// Close stops (Lifecycle), the machines reported and the stream of their changes (Views),
// the Version answer (Base), and how Run watches its objects (Watch). What each machine is
// made of, and every call that changes one, stays with each runtime.
package kit
