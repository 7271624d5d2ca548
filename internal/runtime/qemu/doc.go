// Package qemu is the Machine Runtime Interface runtime for virtual machines: one QEMU
// process per machine, of the machine's own architecture, booting the kernel and initramfs
// of an OCI OS image pulled into a shared cache, with qcow2 overlays for disks, user-mode
// networking, first-boot config through fw_cfg (Ignition) or a NoCloud seed (cloud-init),
// and control over QMP. Machines live in a state directory, one folder each, so QEMU
// processes outlive the runtime and are adopted again when it restarts.
//
// It must never write into the image cache, never signal a process that /proc does not
// show to be the QEMU of one of its machines, and never answer a call before what the call
// promised is on disk.
package qemu
