// Command emulated measures bare-metal deployments of real (emulated) servers: from the
// creation of N Machines to each one's marker on its server's console, through anvil
// (scheduler, poollet, metal runtime, Host controller, Ironic, the Redfish BMC emulator,
// QEMU), against the same ramdisk deployment scripted directly on the same Ironic (set the
// kernel and initramfs, deploy with a config drive, wait for the marker) for N servers of
// a second, identical emulator, in one run:
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./test/scale/emulated -servers 1 -rounds 3
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./test/scale/emulated -servers 10 -rounds 1
//
// Both paths start from Available servers (enrolled and inspected before the clock) and
// alternate which goes first. It prints, one line each and never asserted: seconds per
// path, the ratio anvil/direct, and the most nodes Ironic was deploying at once against
// its limit (max_concurrent_deploy). Needs Ironic (make deps), QEMU and bin/testos.
package main
