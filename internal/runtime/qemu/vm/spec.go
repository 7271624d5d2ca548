package vm

import (
	"fmt"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Accel is how QEMU runs guest code.
type Accel string

const (
	AccelTCG Accel = "tcg" // emulation: works everywhere, slower
	AccelKVM Accel = "kvm" // hardware virtualisation: needs /dev/kvm and a host of the same architecture
)

// DiskFormat is the format of a disk file.
type DiskFormat string

const (
	FormatRaw   DiskFormat = "raw"
	FormatQCOW2 DiskFormat = "qcow2"
)

// Spec is everything one QEMU process starts with. Paths are absolute.
type Spec struct {
	// Name is the guest's name in QEMU (the machine id).
	Name         string
	Architecture computev1alpha1.Architecture
	Accel        Accel
	CPUs         int
	MemoryMiB    int64

	Kernel, Initramfs, KernelCommandLine string
	// Ignition, when set, is a file handed to the guest as fw_cfg opt/com.coreos/config.
	Ignition string
	// MetaData, when set, is a file handed to the guest as fw_cfg opt/anvil/meta-data: an
	// Ignition guest's first-boot metadata, which Ignition itself has no file for.
	MetaData string
	// Seed, when set, is a read-only NoCloud ISO attached as a virtio disk.
	Seed string

	Disks []Disk
	NICs  []NIC
	// RootPorts is how many PCIe root ports to create; every disk and NIC sits on its own
	// port so each can be unplugged, and the spare ones take hotplugged devices.
	RootPorts int

	QMPSocket, ConsoleLog, PIDFile string
	// ConsoleSocket is the serial console's interactive socket: QEMU listens on it and
	// writes everything the guest sends to ConsoleLog as well, with or without a client.
	ConsoleSocket string
	// RunAs, when set ("uid:gid"), is the unprivileged user QEMU drops to once it has
	// opened its files (-runas): a guest that escapes into QEMU is not root on the host.
	// Files plugged later are handed over as descriptors, never opened by path.
	RunAs string
}

// Disk is a virtio block device.
type Disk struct {
	// ID names both the block node and the device in QEMU ([a-z][a-z0-9]*).
	ID       string
	Path     string
	Format   DiskFormat
	ReadOnly bool
	// Port is the index of the root port the disk is plugged into.
	Port int
	// Backing, when set, is the qcow2 overlay's backing disk, named to QEMU rather than
	// read from the overlay's header (a disk plugged later passes both as descriptors).
	Backing *Disk
}

// NIC is a virtio network card on QEMU's user-mode network, or on a switched segment when
// Segment is set.
type NIC struct {
	// ID names both the netdev and the device in QEMU.
	ID  string
	MAC string
	// Port is the index of the root port the card is plugged into.
	Port int
	// SSHPort, when not 0, forwards 127.0.0.1:SSHPort on the host to the guest's port 22.
	SSHPort int
	// Restrict cuts the guest off from the host and the outside (restrict=on): it reaches
	// only its Forwards.
	Restrict bool
	// Forwards are services the guest reaches at addresses of its own network.
	Forwards []Forward
	// Segment, when set, puts the card on a switch (internal/netswitch) instead of the
	// user-mode network: QEMU's dgram netdev, a whole Ethernet frame per datagram between
	// the card's own unix socket and the switch's. SSHPort, Restrict and Forwards are
	// user-mode network options and must then be unset.
	Segment *SegmentSockets
}

// SegmentSockets are a switched NIC's two unix datagram sockets.
type SegmentSockets struct {
	// Local is the card's own socket, which QEMU binds (it must not exist).
	Local string
	// Switch is the switch's socket for the card's segment.
	Switch string
}

// Forward is QEMU's guestfwd: a connection to GuestIP:GuestPort runs Command (through
// /bin/sh), whose standard input and output carry the connection.
type Forward struct {
	GuestIP   string
	GuestPort int
	Command   string
}

func (f Forward) option() string {
	return fmt.Sprintf("tcp:%s:%d-cmd:%s", f.GuestIP, f.GuestPort, f.Command)
}

// GuestAddress is the address QEMU's user-mode network gives every guest NIC (each NIC
// has a network of its own).
const GuestAddress = "10.0.2.15"

// archBinary is the QEMU program for each architecture the runtime can run.
var archBinary = map[computev1alpha1.Architecture]string{
	computev1alpha1.ArchitectureAMD64: "qemu-system-x86_64",
	computev1alpha1.ArchitectureARM64: "qemu-system-aarch64",
}

// Binary returns the QEMU program that runs arch.
func Binary(arch computev1alpha1.Architecture) (string, error) {
	b, ok := archBinary[arch]
	if !ok {
		return "", fmt.Errorf("no QEMU system emulator is known for architecture %q", arch)
	}
	return b, nil
}

// Architectures lists the architectures Binary knows.
func Architectures() []computev1alpha1.Architecture {
	return []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}
}
