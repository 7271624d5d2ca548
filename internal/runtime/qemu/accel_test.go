package qemu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// auto is kvm exactly when the device opens for reading and writing, as QEMU needs it.
func TestAutoAccelFollowsTheDevice(t *testing.T) {
	dir := t.TempDir()
	usable := filepath.Join(dir, "kvm")
	if err := os.WriteFile(usable, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "kvm-ro")
	if err := os.WriteFile(readOnly, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	cases := map[string]vm.Accel{usable: vm.AccelKVM, filepath.Join(dir, "missing"): vm.AccelTCG}
	if os.Geteuid() != 0 { // root opens a 0400 file for writing all the same
		cases[readOnly] = vm.AccelTCG
	}
	for path, want := range cases {
		if got := autoAccel(path); got != want {
			t.Errorf("autoAccel(%s) = %s, want %s", filepath.Base(path), got, want)
		}
	}
}
