// Package inplace decides what anvil's Cluster API in-place update extension answers: which
// changes between two AnvilMachineTemplates (CanUpdateMachineSet) anvil applies in place —
// a new image, by reimaging the anvil Machine; none of a control-plane machine's
// (CanUpdateMachine, ControlPlaneKept) — and how far the in-place update of one machine
// has come (UpdateMachine), read from its anvil Machine's spec, status.image and
// conditions.
//
// It calls nothing and reads no clock: the extension server decodes Cluster API's requests,
// reads the objects, calls these functions and encodes the answers. It must never do I/O,
// and never write the anvil Machine: the AnvilMachine controller carries the image.
package inplace
