// Package broker is the broker runtime: an MRI server whose machines are anvil Machines in
// one namespace of another (downstream) anvil cluster, so that a pool of one cluster can
// be a whole site of another. Its pure half (names, the record, status, capacity) is
// package mapping; this package only reads the downstream through a cache, writes
// Machines and first-boot Secrets of its own (label broker.anvil.dev/pool), and answers
// calls.
//
// It never touches downstream objects it did not make (Hosts, BMC credentials, other
// namespaces' anything, other brokers' Machines), and it never reads an upstream object:
// everything it knows of the upstream comes in the calls (CONTRACT.md I4).
package broker
