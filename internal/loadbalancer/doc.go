// Package loadbalancer serves LoadBalancers (compute.anvil.dev): it forwards TCP connections
// from a loopback address on the pools' host, and from a segment's gateway, to a port of
// some machines of one namespace on that namespace's segment, through the switch
// (internal/netswitch), so the host and the machines reach a workload cluster's API
// servers at one address (docs/loadbalancer.md). Decide and Backends are pure; Server
// holds the listeners; Reconciler is the controller.
package loadbalancer
