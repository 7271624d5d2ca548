// Package vm is one QEMU process: the command line for a machine of either architecture,
// the QMP arguments that hotplug the same devices, starting QEMU detached from its caller,
// finding it again from its pid file, stopping it, and the qcow2 files it boots from.
//
// It never decides what a machine should be doing (the runtime does), and it never
// signals a process unless /proc shows it is the QEMU of the expected QMP socket.
package vm
