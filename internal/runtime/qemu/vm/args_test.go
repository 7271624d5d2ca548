package vm

import (
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func baseSpec(arch computev1alpha1.Architecture) Spec {
	return Spec{
		Name: "m-1", Architecture: arch, Accel: AccelTCG, CPUs: 1, MemoryMiB: 256,
		Kernel: "/c/kernel", Initramfs: "/c/initrd", KernelCommandLine: "console=ttyS0 quiet",
		Disks:     []Disk{{ID: "vol0", Path: "/m/vol0.qcow2", Format: FormatQCOW2, Port: 0}},
		NICs:      []NIC{{ID: "nic0", MAC: "52:54:00:00:00:01", Port: 1, SSHPort: 2222}},
		RootPorts: 4,
		QMPSocket: "/m/qmp.sock", ConsoleLog: "/m/console.log", ConsoleSocket: "/m/console.sock", PIDFile: "/m/qemu.pid",
	}
}

// value returns the argument after the n-th occurrence of flag.
func value(args []string, flag string, n int) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			if n == 0 {
				return args[i+1]
			}
			n--
		}
	}
	return ""
}

func TestArgsPerArchitecture(t *testing.T) {
	for _, tc := range []struct {
		arch              computev1alpha1.Architecture
		accel             Accel
		cpus              int
		machine, cpuModel string
	}{
		{computev1alpha1.ArchitectureAMD64, AccelTCG, 1, "q35", ""},
		{computev1alpha1.ArchitectureAMD64, AccelKVM, 2, "q35", "host"},
		{computev1alpha1.ArchitectureARM64, AccelTCG, 1, "virt", "cortex-a57"},
		{computev1alpha1.ArchitectureARM64, AccelKVM, 1, "virt", "host"},
		{computev1alpha1.ArchitectureARM64, AccelTCG, 16, "virt,gic-version=3", "cortex-a57"},
	} {
		s := baseSpec(tc.arch)
		s.Accel, s.CPUs = tc.accel, tc.cpus
		args, err := Args(s)
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.arch, tc.accel, err)
		}
		if got := value(args, "-machine", 0); got != tc.machine {
			t.Errorf("%s/%s: machine %q, want %q", tc.arch, tc.accel, got, tc.machine)
		}
		if got := value(args, "-cpu", 0); got != tc.cpuModel {
			t.Errorf("%s/%s: cpu %q, want %q", tc.arch, tc.accel, got, tc.cpuModel)
		}
		if got := value(args, "-accel", 0); got != string(tc.accel) {
			t.Errorf("accel %q", got)
		}
		// Every guest's QEMU runs under the seccomp sandbox; the guest-boot tests start
		// QEMU with it, so a filter that broke a VM would fail them.
		if got := value(args, "-sandbox", 0); got != Sandbox || !strings.HasPrefix(got, "on,") {
			t.Errorf("%s/%s: sandbox %q, want %q", tc.arch, tc.accel, got, Sandbox)
		}
	}
}

func TestArgsDevices(t *testing.T) {
	s := baseSpec(computev1alpha1.ArchitectureAMD64)
	s.Ignition = "/m/ignition,1.json"
	s.Seed = "/m/seed.iso"
	s.MetaData = "/m/meta-data"
	args, err := Args(s)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{
		"-kernel /c/kernel", "-initrd /c/initrd", "-append console=ttyS0 quiet",
		"-fw_cfg name=opt/com.coreos/config,file=/m/ignition,,1.json",
		"-fw_cfg name=opt/anvil/meta-data,file=/m/meta-data",
		"-qmp unix:/m/qmp.sock,server=on,wait=off", "-pidfile /m/qemu.pid",
		"-chardev socket,id=console,server=on,wait=off,path=/m/console.sock,logfile=/m/console.log,logappend=on",
		`{"bus":"pcie.0","chassis":4,"driver":"pcie-root-port","id":"rp3","io-reserve":0}`,
		`-blockdev {"driver":"qcow2","file":{"driver":"file","filename":"/m/vol0.qcow2"},"node-name":"vol0"}`,
		`-device {"bus":"rp0","drive":"vol0","driver":"virtio-blk-pci","id":"vol0"}`,
		`"node-name":"seed","read-only":true`, `{"bus":"pcie.0","drive":"seed","driver":"virtio-blk-pci","id":"seed"}`,
		"-netdev user,id=nic0,hostfwd=tcp:127.0.0.1:2222-:22",
		`-device {"bus":"rp1","driver":"virtio-net-pci","id":"nic0","mac":"52:54:00:00:00:01","netdev":"nic0"}`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("command line lacks %q:\n%s", want, line)
		}
	}
}

func TestArgsRefusals(t *testing.T) {
	for name, mutate := range map[string]func(*Spec){
		"unknown architecture": func(s *Spec) { s.Architecture = computev1alpha1.ArchitectureRISCV64 },
		"unknown accelerator":  func(s *Spec) { s.Accel = "hvf" },
		"no kernel":            func(s *Spec) { s.Kernel = "" },
		"no cpu":               func(s *Spec) { s.CPUs = 0 },
		"disk off the ports":   func(s *Spec) { s.Disks[0].Port = 4 },
		"nic off the ports":    func(s *Spec) { s.NICs[0].Port = -1 },
	} {
		s := baseSpec(computev1alpha1.ArchitectureAMD64)
		mutate(&s)
		if _, err := Args(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestArgsRestrictedNICWithForwards(t *testing.T) {
	s := baseSpec(computev1alpha1.ArchitectureAMD64)
	s.NICs = []NIC{{ID: "nic0", MAC: "52:54:00:00:00:01", Port: 1, Restrict: true,
		Forwards: []Forward{{GuestIP: "10.0.2.100", GuestPort: 5000, Command: "'/usr/bin/anvil' 'forward' '127.0.0.1:5001'"}}}}
	args, err := Args(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "user,id=nic0,restrict=on,guestfwd=tcp:10.0.2.100:5000-cmd:'/usr/bin/anvil' 'forward' '127.0.0.1:5001'"
	if got := value(args, "-netdev", 0); got != want {
		t.Errorf("-netdev %s\nwant    %s", got, want)
	}
	s.NICs[0].Forwards[0].Command = "a,b"
	args, _ = Args(s)
	if got := value(args, "-netdev", 0); !strings.HasSuffix(got, "-cmd:a,,b") {
		t.Errorf("a comma in the command is not doubled: %s", got)
	}
	hot := Netdev(s.NICs[0])
	if hot["restrict"] != true || len(hot["guestfwd"].([]map[string]string)) != 1 {
		t.Errorf("hotplugged netdev %v lost the restriction or the forward", hot)
	}
	if open := Netdev(NIC{ID: "nic1"}); open["restrict"] != nil || open["guestfwd"] != nil {
		t.Errorf("a NIC on a plain network got %v", open)
	}
}

// A disk plugged later names its backing disk, so QEMU never opens the path in the
// overlay's header (it has dropped to its own user by then).
func TestBlockdevNamesItsBacking(t *testing.T) {
	d := Disk{ID: "vol2", Path: "/dev/fdset/1", Format: FormatQCOW2,
		Backing: &Disk{ID: "vol2base", Path: "/dev/fdset/2", Format: FormatRaw, ReadOnly: true}}
	want := `{"backing":{"driver":"raw","file":{"driver":"file","filename":"/dev/fdset/2","read-only":true},"node-name":"vol2base","read-only":true},"driver":"qcow2","file":{"driver":"file","filename":"/dev/fdset/1"},"node-name":"vol2"}`
	if got := jsonArg(Blockdev(d)); got != want {
		t.Errorf("blockdev\n got %s\nwant %s", got, want)
	}
}

func TestArgsSegmentNIC(t *testing.T) {
	s := baseSpec(computev1alpha1.ArchitectureAMD64)
	s.NICs = []NIC{{ID: "nic0", MAC: "52:54:00:00:00:01", Port: 1,
		Segment: &SegmentSockets{Local: "/state/m,1/nic0.sock", Switch: "/net/seg.sock"}}}
	args, err := Args(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "dgram,id=nic0,local.type=unix,local.path=/state/m,,1/nic0.sock,remote.type=unix,remote.path=/net/seg.sock"
	if got := value(args, "-netdev", 0); got != want {
		t.Errorf("-netdev %s\nwant    %s", got, want)
	}
	hot := Netdev(s.NICs[0])
	if hot["type"] != "dgram" || hot["local"].(map[string]string)["path"] != "/state/m,1/nic0.sock" ||
		hot["remote"].(map[string]string)["path"] != "/net/seg.sock" {
		t.Errorf("hotplugged netdev %v", hot)
	}
	for name, mutate := range map[string]func(*NIC){
		"ssh port": func(n *NIC) { n.SSHPort = 2222 },
		"restrict": func(n *NIC) { n.Restrict = true },
		"forwards": func(n *NIC) { n.Forwards = []Forward{{GuestIP: "10.0.2.100", GuestPort: 1, Command: "x"}} },
	} {
		bad := baseSpec(computev1alpha1.ArchitectureAMD64)
		bad.NICs = []NIC{s.NICs[0]}
		mutate(&bad.NICs[0])
		if _, err := Args(bad); err == nil {
			t.Errorf("a segment NIC with %s: accepted", name)
		}
	}
}
