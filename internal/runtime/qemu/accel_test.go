package qemu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// auto is kvm exactly when the device opens for reading and writing and QEMU runs a KVM
// guest: a /dev/kvm whose guests abort at their first reset (nested virtualisation, as on
// the machines these tests ran on) gives tcg.
func TestAutoAccelNeedsTheDeviceAndAWorkingGuest(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, "kvm")
	if err := os.WriteFile(device, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Stand-ins for QEMU with KVM: one that answers QMP's quit, one that aborts as QEMU did.
	works := script("qemu-works", `cat >/dev/null; exit 0`)
	aborts := script("qemu-aborts", `echo "kvm_buf_set_msrs: Assertion failed" >&2; exit 134`)
	for _, tc := range []struct {
		name, device, program string
		want                  vm.Accel
	}{
		{"a device and a guest that runs", device, works, vm.AccelKVM},
		{"a device whose guests abort", device, aborts, vm.AccelTCG},
		{"no device", filepath.Join(dir, "missing"), works, vm.AccelTCG},
	} {
		if got := autoAccel(tc.device, tc.program, logr.Discard()); got != tc.want {
			t.Errorf("%s: autoAccel = %s, want %s", tc.name, got, tc.want)
		}
	}
}
