// Package placement holds the metal runtime's decisions about Hosts, as pure functions
// of a snapshot: which Hosts count towards the pool's capacity, which MachineClasses
// they can run, whether a HostPolicy lets a namespace use a Host, and which free Hosts,
// in which order, may take a machine, or why none may.
//
// It never reads or writes the API server and never keeps state: the runtime hands it
// Hosts, HardwareData and HostPolicies and carries out what it answers.
package placement
