// Package anvilmachine decides, for one AnvilMachine (Cluster API's infrastructure machine on
// anvil), which anvil Machine and first-boot Secret it needs, what changes in place (the
// image), what its status and Ready condition say, whether `clusterctl move` must wait, and
// what its deletion does.
//
// It calls nothing and reads no clock: the AnvilMachine controller reads the objects, calls
// Decide or DecideDelete, and applies the plan. It must never do I/O.
package anvilmachine
