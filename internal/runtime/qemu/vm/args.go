package vm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Sandbox is QEMU's seccomp filter for guests: a QEMU a guest breaks out of cannot use
// the system calls QEMU never needs (mount, reboot, kexec, module loading, obsolete ones).
// The filter is inherited by what QEMU spawns, and a NIC's guest forwards spawn a command
// per connection (a NIC with forwards may also be hot-plugged), so two stricter groups
// are left out: elevateprivileges=deny blocks setsid, which libslirp's child calls
// before it runs the command (seen as SIGSYS on syscall 112: an image build's registry
// forward died so), and resourcecontrol=deny blocks the CPU affinity calls a Go program
// such as anvil forward makes as it starts (sched_getaffinity, read by the Go runtime).
const Sandbox = "on,obsolete=deny"

// FWCfgMetaData is the fw_cfg name an Ignition guest reads its first-boot metadata from
// (/sys/firmware/qemu_fw_cfg/by_name/opt/anvil/meta-data/raw): the same lines a NoCloud
// seed's meta-data has.
const FWCfgMetaData = "opt/anvil/meta-data"

// Args returns QEMU's command line (without the program) for s. The same device
// descriptions serve for hotplug, so a device plugged later looks like one from the start.
func Args(s Spec) ([]string, error) {
	if s.CPUs < 1 || s.MemoryMiB < 1 {
		return nil, fmt.Errorf("vm %s: needs at least one cpu and 1 MiB of memory", s.Name)
	}
	if s.Kernel == "" {
		return nil, fmt.Errorf("vm %s: no kernel to boot", s.Name)
	}
	machine, cpu, err := Board(s.Architecture, s.Accel, s.CPUs)
	if err != nil {
		return nil, err
	}
	args := []string{
		"-name", "guest=" + s.Name,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-sandbox", Sandbox,
		"-machine", machine, "-accel", string(s.Accel),
	}
	if s.RunAs != "" {
		args = append(args, "-runas", s.RunAs)
	}
	if cpu != "" {
		args = append(args, "-cpu", cpu)
	}
	args = append(args,
		"-smp", strconv.Itoa(s.CPUs), "-m", strconv.FormatInt(s.MemoryMiB, 10)+"M",
		"-kernel", s.Kernel,
	)
	if s.Initramfs != "" {
		args = append(args, "-initrd", s.Initramfs)
	}
	if s.KernelCommandLine != "" {
		args = append(args, "-append", s.KernelCommandLine)
	}
	if s.Ignition != "" {
		args = append(args, "-fw_cfg", "name=opt/com.coreos/config,file="+optionValue(s.Ignition))
	}
	if s.MetaData != "" {
		args = append(args, "-fw_cfg", "name="+FWCfgMetaData+",file="+optionValue(s.MetaData))
	}
	if s.ConsoleSocket == "" || s.ConsoleLog == "" {
		return nil, fmt.Errorf("vm %s: needs a console socket and a console log", s.Name)
	}
	args = append(args,
		// One client at a time on the socket (the runtime's writer); the log has every
		// byte whether a client is connected or not, across the runtime's restarts.
		"-chardev", "socket,id=console,server=on,wait=off,path="+optionValue(s.ConsoleSocket)+
			",logfile="+optionValue(s.ConsoleLog)+",logappend=on",
		"-serial", "chardev:console",
		"-qmp", "unix:"+optionValue(s.QMPSocket)+",server=on,wait=off",
		"-pidfile", s.PIDFile,
		"-device", jsonArg(map[string]any{"driver": "virtio-rng-pci", "bus": "pcie.0"}),
	)
	for i := 0; i < s.RootPorts; i++ {
		args = append(args, "-device", jsonArg(rootPort(i)))
	}
	if s.Seed != "" {
		seed := Disk{ID: "seed", Path: s.Seed, Format: FormatRaw, ReadOnly: true}
		dev := DiskDevice(seed)
		dev["bus"] = "pcie.0" // never unplugged, so it needs no root port
		args = append(args, "-blockdev", jsonArg(Blockdev(seed)), "-device", jsonArg(dev))
	}
	for _, d := range s.Disks {
		if d.Port < 0 || d.Port >= s.RootPorts {
			return nil, fmt.Errorf("vm %s: disk %s on root port %d of %d", s.Name, d.ID, d.Port, s.RootPorts)
		}
		args = append(args, "-blockdev", jsonArg(Blockdev(d)), "-device", jsonArg(DiskDevice(d)))
	}
	for _, n := range s.NICs {
		if n.Port < 0 || n.Port >= s.RootPorts {
			return nil, fmt.Errorf("vm %s: nic %s on root port %d of %d", s.Name, n.ID, n.Port, s.RootPorts)
		}
		if n.Segment != nil && (n.SSHPort != 0 || n.Restrict || len(n.Forwards) > 0) {
			return nil, fmt.Errorf("vm %s: nic %s is on a segment: an SSH port, restrict and forwards are user-network options", s.Name, n.ID)
		}
		args = append(args, "-netdev", NetdevOption(n), "-device", jsonArg(NICDevice(n)))
	}
	return args, nil
}

// Board returns the machine type and cpu model. aarch64 under TCG uses cortex-a57: "max"
// emulates pointer authentication and boots markedly slower.
func Board(arch computev1alpha1.Architecture, accel Accel, cpus int) (machine, cpu string, err error) {
	if accel != AccelTCG && accel != AccelKVM {
		return "", "", fmt.Errorf("accelerator %q: use tcg or kvm", accel)
	}
	switch arch {
	case computev1alpha1.ArchitectureAMD64:
		if accel == AccelKVM {
			return "q35", "host", nil
		}
		return "q35", "", nil
	case computev1alpha1.ArchitectureARM64:
		machine = "virt"
		if cpus > 8 {
			machine = "virt,gic-version=3" // GICv2 stops at 8 cpus
		}
		if accel == AccelKVM {
			return machine, "host", nil
		}
		return machine, "cortex-a57", nil
	}
	return "", "", fmt.Errorf("no QEMU board is known for architecture %q", arch)
}

func rootPort(i int) map[string]any {
	// Devices behind these ports are virtio 1.0 (memory BARs only): reserving no I/O
	// space per port lets many ports fit the 64 KiB of x86 I/O space.
	return map[string]any{"driver": "pcie-root-port", "id": RootPortID(i), "bus": "pcie.0", "chassis": i + 1, "io-reserve": 0}
}

// RootPortID is the QEMU id of root port i.
func RootPortID(i int) string { return "rp" + strconv.Itoa(i) }

// Blockdev returns the blockdev-add arguments (and -blockdev value) of d.
func Blockdev(d Disk) map[string]any {
	file := map[string]any{"driver": "file", "filename": d.Path}
	node := map[string]any{"driver": string(d.Format), "node-name": d.ID, "file": file}
	if d.ReadOnly {
		file["read-only"] = true
		node["read-only"] = true
	}
	if d.Backing != nil {
		node["backing"] = Blockdev(*d.Backing)
	}
	return node
}

// DiskDevice returns the device_add arguments (and -device value) of d.
func DiskDevice(d Disk) map[string]any {
	return map[string]any{"driver": "virtio-blk-pci", "drive": d.ID, "id": d.ID, "bus": RootPortID(d.Port)}
}

// Netdev returns the netdev_add arguments of a NIC plugged while the VM runs. Hotplugged
// NICs get no SSH port forward; their restriction and guest forwards they keep.
func Netdev(n NIC) map[string]any {
	if n.Segment != nil {
		return map[string]any{"type": "dgram", "id": n.ID,
			"local":  map[string]string{"type": "unix", "path": n.Segment.Local},
			"remote": map[string]string{"type": "unix", "path": n.Segment.Switch}}
	}
	args := map[string]any{"type": "user", "id": n.ID}
	if n.Restrict {
		args["restrict"] = true
	}
	if len(n.Forwards) > 0 {
		fwds := make([]map[string]string, len(n.Forwards))
		for i, f := range n.Forwards {
			fwds[i] = map[string]string{"str": f.option()}
		}
		args["guestfwd"] = fwds
	}
	return args
}

// NICDevice returns the device_add arguments (and -device value) of n.
func NICDevice(n NIC) map[string]any {
	return map[string]any{"driver": "virtio-net-pci", "netdev": n.ID, "id": n.ID, "mac": n.MAC, "bus": RootPortID(n.Port)}
}

// NetdevOption is the -netdev value of n (its device apart): the user network, restricted
// when n says so, with n's forwards and SSH port. The BMC emulator's servers use it too.
func NetdevOption(n NIC) string {
	if n.Segment != nil {
		return "dgram,id=" + n.ID + ",local.type=unix,local.path=" + optionValue(n.Segment.Local) +
			",remote.type=unix,remote.path=" + optionValue(n.Segment.Switch)
	}
	opt := "user,id=" + n.ID
	if n.Restrict {
		opt += ",restrict=on"
	}
	for _, f := range n.Forwards {
		opt += ",guestfwd=" + optionValue(f.option())
	}
	if n.SSHPort != 0 {
		opt += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:22", n.SSHPort)
	}
	return opt
}

// optionValue escapes a value inside QEMU's comma-separated options, where a comma is
// written twice.
func optionValue(v string) string { return strings.ReplaceAll(v, ",", ",,") }

func jsonArg(v map[string]any) string {
	raw, _ := json.Marshal(v) // maps of strings, numbers and bools always marshal
	return string(raw)
}
