// Package bmcemu emulates servers with real BMCs: one Redfish service (HTTP basic auth) in
// front of QEMU virtual machines, one ComputerSystem and one Manager per machine. Ironic's
// redfish hardware type drives it as it drives a datacentre's servers: power actions start,
// reset and stop the QEMU process; InsertMedia downloads the image from the URL Ironic
// gives and puts it in the machine's virtual CD-ROM (through QMP while it runs) or its
// virtual USB stick; the boot source override chooses the CD-ROM or the disk at the next
// start; inventory (processors, memory, NIC MACs, disk size) is what the QEMU command line
// gives the machine, so inspection reports the truth. Each machine's serial console goes
// to a file.
//
// The emulator's process is a BMC, not the servers' power supply: servers keep running
// when it stops or is killed. An emulator started again on the same state directory adopts
// each server's running QEMU (its pid file and QMP socket, vm.Find, as the qemu runtime
// adopts VMs), never starts a second one nor removes a live one's socket, and finds the
// media and boot override each BMC held (bmc.json in the server's folder). PowerOffAll ends
// the servers for those that must leave none behind.
//
// What differs from a physical server, on purpose: a reset is a cold restart of QEMU (so a
// changed boot override applies, as firmware would read it); the USB stick is presented to
// the guest as a read-only virtio disk (the test OS's cloud kernel has no USB storage; a real
// server presents USB, so an image for real servers needs USB storage drivers), and a stick
// inserted while the machine runs appears at its next start. Machines boot with SeaBIOS on
// amd64 (q35); the emulated network is QEMU's restricted user network: DHCP and nothing
// else, since a ramdisk deploy needs no call back to Ironic.
package bmcemu
