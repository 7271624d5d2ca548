package bmcemu

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Spec is one emulated server: what its BMC reports and its QEMU is started with.
type Spec struct {
	// Name is the ComputerSystem's and the Manager's id in the BMC's URLs.
	Name      string
	CPUs      int
	MemoryMiB int64
	// DiskGiB is the size of the server's one disk (a sparse qcow2 file).
	DiskGiB int64
	// DataDiskMiB, when above 0, gives the server a second disk of that size (a sparse
	// raw file the tests can read: what a tenant left on it, what the eraser wiped).
	DataDiskMiB int64
	// MAC is the address of its one NIC.
	MAC string
	// SSHPort, when not 0, forwards 127.0.0.1:SSHPort on the host to the server's port 22:
	// the route a site's jump host gives its users, here the only way in to a server whose
	// network is restricted (the Host's metalv1alpha1.AnnotationSSHAddress names it).
	SSHPort int
	// Architecture is the server's CPU: amd64 (also when empty) or arm64.
	Architecture computev1alpha1.Architecture
	// UEFI makes an amd64 server boot UEFI (OVMF, package ovmf) instead of SeaBIOS
	// (Legacy). arm64 servers always boot UEFI (AAVMF, package qemu-efi-aarch64), as
	// arm64 servers do.
	UEFI bool
}

// Boot modes, as Redfish's BootSourceOverrideMode names them.
const (
	bootLegacy = "Legacy"
	bootUEFI   = "UEFI"
)

// arch is the server's architecture, amd64 when the Spec leaves it out.
func (s Spec) arch() computev1alpha1.Architecture {
	if s.Architecture == "" {
		return computev1alpha1.ArchitectureAMD64
	}
	return s.Architecture
}

// BootMode is how the server boots: UEFI (arm64, or amd64 with UEFI set) or Legacy. A
// Host for it says the same in spec.bootMode.
func (s Spec) BootMode() string {
	if s.UEFI || s.arch() == computev1alpha1.ArchitectureARM64 {
		return bootUEFI
	}
	return bootLegacy
}

// uefiFirmware is, per architecture, the UEFI firmware's code (read-only, shared) and the
// template of the variable store each server gets a copy of (its NVRAM, kept across
// power cycles). Without Secure Boot: the ESP's GRUB is not signed.
var uefiFirmware = map[computev1alpha1.Architecture]struct{ code, vars string }{
	computev1alpha1.ArchitectureAMD64: {"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
	computev1alpha1.ArchitectureARM64: {"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	macRE  = regexp.MustCompile(`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`)
)

// validate says what is wrong with s, if anything.
func (s Spec) validate() error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("server name %q: use lower-case letters, digits and dashes", s.Name)
	case s.CPUs < 1 || s.MemoryMiB < 1024:
		return fmt.Errorf("server %s: needs at least 1 cpu and 1024 MiB of memory", s.Name)
	case s.MemoryMiB%1024 != 0:
		// Redfish reports TotalSystemMemoryGiB, which sushy reads as a whole number:
		// Ironic's inspection fails on a server whose memory it reads as 0 GiB.
		return fmt.Errorf("server %s: memory %d MiB: give whole GiB (a multiple of 1024)", s.Name, s.MemoryMiB)
	case s.DiskGiB < 1:
		return fmt.Errorf("server %s: needs a disk of at least 1 GiB", s.Name)
	case s.DataDiskMiB < 0:
		return fmt.Errorf("server %s: data disk of %d MiB: give a size above 0, or 0 for none", s.Name, s.DataDiskMiB)
	case !macRE.MatchString(s.MAC):
		return fmt.Errorf("server %s: MAC %q: write six lower-case hex pairs separated by colons", s.Name, s.MAC)
	case s.SSHPort < 0 || s.SSHPort > 65535:
		return fmt.Errorf("server %s: SSH port %d: use 1 to 65535, or 0 for none", s.Name, s.SSHPort)
	case s.arch() != computev1alpha1.ArchitectureAMD64 && s.arch() != computev1alpha1.ArchitectureARM64:
		return fmt.Errorf("server %s: architecture %q: use amd64 or arm64", s.Name, s.Architecture)
	}
	return nil
}

// Boot source override targets the emulator offers.
const (
	targetNone = "None"
	targetCd   = "Cd"
	targetHdd  = "Hdd"
)

// launch is what one start of a server's QEMU needs besides its Spec.
type launch struct {
	// console is the serial port's log; consoleSocket the socket QEMU serves it on
	// (serialPort joins a BMC session to it).
	disk, console, consoleSocket, qmp, pidFile string
	// data is the second disk's file ("" when the server has none).
	data string
	// vars is a UEFI server's variable store.
	vars string
	// cd and usb are the inserted media's files ("" when empty).
	cd, usb string
	// bootCd: the boot override says Cd, so the CD-ROM boots first.
	bootCd bool
	// runAs is QEMU's -runas ("" to stay the emulator's user).
	runAs string
	// forwards are the site network's routes (Config.Forwards).
	forwards []vm.Forward
}

// qemuArgs is the QEMU command line (without the program) of a server: its board (q35
// for amd64, with SeaBIOS or OVMF; virt with AAVMF for arm64), a virtio disk, a CD-ROM whose tray
// QMP can load and empty (id "cd": IDE on q35, SCSI on virt, which has no IDE), the USB
// stick as a read-only virtio disk when one is inserted, a second (raw) virtio disk when the
// Spec asks for one, and a NIC on a restricted user
// network. Boot order is by bootindex (SeaBIOS and the UEFI firmware both follow it), so
// the override decides it. The network's only ways out are the site's forwards; the only
// way in is the SSH port, when the Spec gives one.
func qemuArgs(s Spec, l launch, accel vm.Accel) ([]string, error) {
	machine, cpu, err := vm.Board(s.arch(), accel, s.CPUs)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	diskIndex, cdIndex := 0, 1
	if l.bootCd {
		diskIndex, cdIndex = 1, 0
	}
	cd := "if=none,id=cdmedia,media=cdrom,readonly=on"
	if l.cd != "" {
		cd += ",format=raw,file=" + optionValue(l.cd)
	}
	args := []string{
		"-name", "guest=" + s.Name,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-sandbox", vm.Sandbox,
		"-machine", machine, "-accel", string(accel),
	}
	if l.runAs != "" {
		args = append(args, "-runas", l.runAs)
	}
	if cpu != "" {
		args = append(args, "-cpu", cpu)
	}
	if s.BootMode() == bootUEFI {
		args = append(args,
			"-drive", "if=pflash,format=raw,readonly=on,file="+optionValue(uefiFirmware[s.arch()].code),
			"-drive", "if=pflash,format=raw,file="+optionValue(l.vars))
	}
	// The CD-ROM: IDE on q35; virt has no IDE, so SCSI there.
	cdDevice, cdBus := "ide-cd", "ide.0"
	if s.arch() == computev1alpha1.ArchitectureARM64 {
		cdDevice, cdBus = "scsi-cd", "scsi.0"
		args = append(args, "-device", "virtio-scsi-pci,id=scsi,bus=pcie.0")
	}
	args = append(args,
		"-smp", strconv.Itoa(s.CPUs), "-m", strconv.FormatInt(s.MemoryMiB, 10)+"M",
		"-chardev", "socket,id=console,server=on,wait=off,path="+optionValue(l.consoleSocket)+
			",logfile="+optionValue(l.console)+",logappend=on",
		"-serial", "chardev:console",
		"-qmp", "unix:"+optionValue(l.qmp)+",server=on,wait=off",
		"-pidfile", l.pidFile,
		"-drive", "if=none,id=disk,format=qcow2,file="+optionValue(l.disk),
		"-device", fmt.Sprintf("virtio-blk-pci,drive=disk,id=diskdev,bus=pcie.0,bootindex=%d", diskIndex),
		"-drive", cd,
		"-device", fmt.Sprintf("%s,drive=cdmedia,id=cd,bus=%s,bootindex=%d", cdDevice, cdBus, cdIndex),
	)
	if l.data != "" {
		args = append(args,
			"-drive", "if=none,id=data,format=raw,file="+optionValue(l.data),
			"-device", "virtio-blk-pci,drive=data,id=datadev,bus=pcie.0")
	}
	if l.usb != "" {
		args = append(args,
			"-drive", "if=none,id=usbmedia,format=raw,readonly=on,file="+optionValue(l.usb),
			"-device", "virtio-blk-pci,drive=usbmedia,id=usb,bus=pcie.0")
	}
	return append(args,
		"-netdev", vm.NetdevOption(vm.NIC{ID: "net0", Restrict: true, Forwards: l.forwards, SSHPort: s.SSHPort}),
		"-device", "virtio-net-pci,netdev=net0,id=nic0,bus=pcie.0,mac="+s.MAC), nil
}

// guestNetwork is QEMU's user network, where .2 (gateway), .3 (DNS) and .15 (the server)
// are taken.
var guestNetwork = &net.IPNet{IP: net.IPv4(10, 0, 2, 0), Mask: net.CIDRMask(24, 32)}

// checkForward says what is wrong with a site route, if anything.
func checkForward(f vm.Forward) error {
	ip := net.ParseIP(f.GuestIP).To4()
	switch {
	case ip == nil || !guestNetwork.Contains(ip) || ip[3] == 2 || ip[3] == 3 || ip.Equal(net.ParseIP(vm.GuestAddress)):
		return fmt.Errorf("bmcemu: forward from %s: use an address of 10.0.2.0/24 other than .2, .3 and .15", f.GuestIP)
	case f.GuestPort < 1 || f.GuestPort > 65535:
		return fmt.Errorf("bmcemu: forward from %s: port %d: use 1 to 65535", f.GuestIP, f.GuestPort)
	case strings.TrimSpace(f.Command) == "":
		return fmt.Errorf("bmcemu: forward from %s:%d: no command (qemu.GuestForwards makes one)", f.GuestIP, f.GuestPort)
	}
	return nil
}

// optionValue escapes a value inside QEMU's comma-separated options.
func optionValue(v string) string { return strings.ReplaceAll(v, ",", ",,") }
