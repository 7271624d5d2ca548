package bmcemu

import (
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

func TestQemuArgsFollowTheBootOverrideAndMedia(t *testing.T) {
	l := launch{disk: "/s/disk.qcow2", console: "/s/console.log", consoleSocket: "/s/console.sock", qmp: "/s/qmp.sock", pidFile: "/s/qemu.pid"}
	arm, uefi, ssh := spec, spec, spec
	arm.Architecture, uefi.UEFI, ssh.SSHPort = computev1alpha1.ArchitectureARM64, true, 2201
	for _, tc := range []struct {
		name     string
		s        Spec
		l        func(launch) launch
		want     []string
		wantNone []string
	}{
		{"disk first", spec, func(l launch) launch { return l },
			[]string{"drive=disk,id=diskdev,bus=pcie.0,bootindex=0", "id=cd,bus=ide.0,bootindex=1", "if=none,id=cdmedia,media=cdrom,readonly=on",
				"user,id=net0,restrict=on", "mac=52:54:00:12:34:56"},
			[]string{"usbmedia", "file=/m", "pflash", "scsi", "datadev", "guestfwd"}},
		{"a data disk is a second, raw, writable virtio disk", spec, func(l launch) launch { l.data = "/s/data.raw"; return l },
			[]string{"if=none,id=data,format=raw,file=/s/data.raw", "virtio-blk-pci,drive=data,id=datadev,bus=pcie.0"}, []string{"id=data,format=raw,readonly"}},
		{"Cd override boots the CD-ROM first", spec, func(l launch) launch { l.bootCd = true; return l },
			[]string{"bootindex=1", "id=cd,bus=ide.0,bootindex=0"}, nil},
		{"inserted media are attached", spec, func(l launch) launch { l.cd, l.usb = "/m/cd,1", "/m/usb"; return l },
			[]string{"media=cdrom,readonly=on,format=raw,file=/m/cd,,1", "id=usbmedia,format=raw,readonly=on,file=/m/usb", "drive=usbmedia,id=usb"}, nil},
		{"arm64 boots AAVMF on virt, its CD-ROM on SCSI", arm, func(l launch) launch { l.vars, l.bootCd = "/s/efivars.fd", true; return l },
			[]string{"-machine virt", "-cpu cortex-a57", "if=pflash,format=raw,readonly=on,file=/usr/share/AAVMF/AAVMF_CODE.fd",
				"if=pflash,format=raw,file=/s/efivars.fd", "virtio-scsi-pci,id=scsi", "scsi-cd,drive=cdmedia,id=cd,bus=scsi.0,bootindex=0",
				"diskdev,bus=pcie.0,bootindex=1"},
			[]string{"ide", "q35"}},
		{"amd64 with UEFI boots OVMF on q35", uefi, func(l launch) launch { l.vars = "/s/efivars.fd"; return l },
			[]string{"-machine q35", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
				"if=pflash,format=raw,file=/s/efivars.fd", "ide-cd,drive=cdmedia,id=cd,bus=ide.0,bootindex=1"},
			[]string{"scsi", "-machine virt"}},
		{"the site's forwards join the restricted network, commas doubled", spec, func(l launch) launch {
			l.forwards = []vm.Forward{{GuestIP: "10.0.2.100", GuestPort: 6443, Command: "'/run/anvil-qemu/anvil-1' 'forward' '127.0.0.1:41,1'"}}
			return l
		},
			[]string{"user,id=net0,restrict=on,guestfwd=tcp:10.0.2.100:6443-cmd:'/run/anvil-qemu/anvil-1' 'forward' '127.0.0.1:41,,1' -device virtio-net-pci,netdev=net0"},
			[]string{"restrict=off", "hostfwd"}},
		{"an SSH port is the one way in, loopback only, on the restricted network", ssh, func(l launch) launch { return l },
			[]string{"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:2201-:22 -device"},
			[]string{"hostfwd=tcp::", "hostfwd=tcp:0.0.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := qemuArgs(tc.s, tc.l(l), "tcg")
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Join(list, " ")
			for _, w := range tc.want {
				if !strings.Contains(args, w) {
					t.Errorf("args lack %q:\n%s", w, args)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(args, w) {
					t.Errorf("args have %q:\n%s", w, args)
				}
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Spec)
		want string
	}{
		{"valid", func(*Spec) {}, ""},
		{"bad name", func(s *Spec) { s.Name = "Server_1" }, "lower-case"},
		{"no cpu", func(s *Spec) { s.CPUs = 0 }, "at least 1 cpu"},
		{"tiny memory", func(s *Spec) { s.MemoryMiB = 16 }, "1024 MiB"},
		{"memory not in whole GiB", func(s *Spec) { s.MemoryMiB = 1536 }, "whole GiB"},
		{"no disk", func(s *Spec) { s.DiskGiB = 0 }, "disk"},
		{"a data disk of negative size", func(s *Spec) { s.DataDiskMiB = -1 }, "data disk"},
		{"bad MAC", func(s *Spec) { s.MAC = "52:54:00:12:34" }, "six lower-case hex pairs"},
		{"an SSH port", func(s *Spec) { s.SSHPort = 2222 }, ""},
		{"an SSH port out of range", func(s *Spec) { s.SSHPort = 70000 }, "SSH port 70000"},
		{"arm64", func(s *Spec) { s.Architecture = computev1alpha1.ArchitectureARM64 }, ""},
		{"unknown architecture", func(s *Spec) { s.Architecture = "riscv64" }, "use amd64 or arm64"},
	} {
		s := spec
		tc.mod(&s)
		err := s.validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckForward(t *testing.T) {
	ok := vm.Forward{GuestIP: "10.0.2.100", GuestPort: 6443, Command: "'anvil' 'forward' '127.0.0.1:6443'"}
	for _, tc := range []struct {
		name string
		mod  func(*vm.Forward)
		want string
	}{
		{"valid", func(*vm.Forward) {}, ""},
		{"outside the guest network", func(f *vm.Forward) { f.GuestIP = "127.0.0.1" }, "10.0.2.0/24"},
		{"the gateway", func(f *vm.Forward) { f.GuestIP = "10.0.2.2" }, "other than .2"},
		{"the DNS", func(f *vm.Forward) { f.GuestIP = "10.0.2.3" }, "other than .2"},
		{"the server itself", func(f *vm.Forward) { f.GuestIP = "10.0.2.15" }, "other than .2"},
		{"not an IP", func(f *vm.Forward) { f.GuestIP = "apiserver" }, "10.0.2.0/24"},
		{"port 0", func(f *vm.Forward) { f.GuestPort = 0 }, "1 to 65535"},
		{"port too big", func(f *vm.Forward) { f.GuestPort = 70000 }, "1 to 65535"},
		{"no command", func(f *vm.Forward) { f.Command = " " }, "no command"},
	} {
		f := ok
		tc.mod(&f)
		err := checkForward(f)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: checkForward() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Start refuses a bad route before it starts anything.
func TestStartRefusesABadForward(t *testing.T) {
	_, err := Start(Config{StateDir: t.TempDir(), Username: "u", Password: "p", Servers: []Spec{spec},
		Forwards: []vm.Forward{{GuestIP: "10.0.2.2", GuestPort: 6443, Command: "'anvil' 'forward' '127.0.0.1:1'"}}})
	if err == nil || !strings.Contains(err.Error(), "forward from 10.0.2.2") {
		t.Fatalf("Start = %v, want the forward refused", err)
	}
}
