// Package networkaccess decides whether a Machine may put a NIC on one of a pool's
// networks: the pool's spec.networks (who) against what its runtime gives each network
// (forwards, outbound access). It is pure: the poollet and the scheduler fetch the pool,
// the namespace and the NICs and call Check. It must never read or write anything itself.
package networkaccess
