package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func otherArch() computev1alpha1.Architecture {
	if goruntime.GOARCH == string(computev1alpha1.ArchitectureARM64) {
		return computev1alpha1.ArchitectureAMD64
	}
	return computev1alpha1.ArchitectureARM64
}

// Only the host's own architecture runs natively, and only with KVM; every emulated
// architecture has a reason a person can read.
func TestNativeOnlyWithKVMOnTheHostsOwnArchitecture(t *testing.T) {
	host := computev1alpha1.Architecture(goruntime.GOARCH)
	tcg := Accelerator{Accel: AccelTCG, Why: "the accelerator is set to tcg"}
	kvm := Accelerator{Accel: AccelKVM}
	for _, tc := range []struct {
		accel Accelerator
		arch  computev1alpha1.Architecture
		want  bool
	}{
		{kvm, host, true},
		{kvm, otherArch(), false},
		{tcg, host, false},
		{tcg, otherArch(), false},
	} {
		if got := tc.accel.Native(tc.arch); got != tc.want {
			t.Errorf("%s on %s: native = %v, want %v", tc.arch, tc.accel.Accel, got, tc.want)
		}
		if why := tc.accel.Emulated(tc.arch); (why == "") != tc.want {
			t.Errorf("%s on %s: emulated because %q, native %v", tc.arch, tc.accel.Accel, why, tc.want)
		}
	}
	if why := tcg.Emulated(otherArch()); !strings.Contains(why, "host's own architecture") {
		t.Errorf("another architecture emulated because %q", why)
	}
}

// auto is kvm exactly when the device opens for reading and writing and a KVM guest runs;
// kvm and tcg are taken as asked, anything else refused.
func TestChooseAccel(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, "kvm")
	if err := os.WriteFile(device, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	runs := func(context.Context, string, computev1alpha1.Architecture) error { return nil }
	frozen := func(context.Context, string, computev1alpha1.Architecture) error {
		return errors.New("its guest showed no sign of running")
	}
	for _, tc := range []struct {
		name    string
		want    Accel
		device  string
		probe   func(context.Context, string, computev1alpha1.Architecture) error
		got     Accel
		because string
	}{
		{"auto, a device and a guest that runs", AccelAuto, device, runs, AccelKVM, ""},
		{"auto, a device whose guests never run", AccelAuto, device, frozen, AccelTCG, "KVM does not run guests here: its guest showed no sign"},
		{"auto, no device", AccelAuto, filepath.Join(dir, "missing"), runs, AccelTCG, "no usable KVM"},
		{"kvm as asked", AccelKVM, filepath.Join(dir, "missing"), frozen, AccelKVM, ""},
		{"tcg as asked", AccelTCG, device, runs, AccelTCG, "set to tcg"},
	} {
		got, err := chooseAccel(context.Background(), tc.want, tc.device, tc.probe)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Accel != tc.got || !strings.Contains(got.Why, tc.because) || (tc.because == "") != (got.Why == "") {
			t.Errorf("%s: chose %s because %q, want %s because %q", tc.name, got.Accel, got.Why, tc.got, tc.because)
		}
	}
	if _, err := chooseAccel(context.Background(), "hvf", device, runs); err == nil {
		t.Error("accelerator hvf accepted")
	}
}

// A QEMU that starts with KVM and answers its monitor while the guest is paused, but whose
// guest never executes an instruction (KVM on some nested hosts), is not a working KVM:
// QEMU coming up and quitting on request proves nothing.
func TestProbeRefusesAQEMUWhoseGuestNeverRuns(t *testing.T) {
	bin := t.TempDir()
	host := computev1alpha1.Architecture(goruntime.GOARCH)
	program, err := Binary(host)
	if err != nil {
		t.Fatal(err)
	}
	// Answers QMP on stdin (greeting, a return per command, quit exits 0), then waits
	// forever without a byte on its serial port.
	fake := `#!/bin/sh
echo '{"QMP": {"version": {}, "capabilities": []}}'
while read -r line; do
	case "$line" in *quit*) echo '{"return": {}}'; exit 0;; esac
	echo '{"return": {}}'
done
exec sleep 60
`
	if err := os.WriteFile(filepath.Join(bin, program), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	device := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(device, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	quick := func(ctx context.Context, program string, arch computev1alpha1.Architecture) error {
		return probeGuest(ctx, program, arch, AccelKVM, 2*time.Second)
	}
	start := time.Now()
	got, err := chooseAccel(context.Background(), AccelAuto, device, quick)
	if err != nil {
		t.Fatal(err)
	}
	if got.Accel != AccelTCG || !strings.Contains(got.Why, "no sign of running") {
		t.Fatalf("a QEMU whose guest never runs: chose %s because %q, want tcg because its guest showed no sign of running", got.Accel, got.Why)
	}
	// The whole process group was killed at the deadline, not left to its sleep.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the probe took %s with a 2s deadline", took)
	}
	t.Logf("chose %s: %s", got.Accel, got.Why)
}

// A QEMU that fails to start says why, in QEMU's own last line.
func TestProbeSaysWhyQEMUQuit(t *testing.T) {
	program := filepath.Join(t.TempDir(), "qemu-aborts")
	if err := os.WriteFile(program, []byte("#!/bin/sh\necho 'kvm_buf_set_msrs: Assertion failed' >&2\nexit 134\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := probeGuest(context.Background(), program, computev1alpha1.Architecture(goruntime.GOARCH), AccelKVM, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "kvm_buf_set_msrs: Assertion failed") {
		t.Fatalf("probe of a QEMU that aborts: %v", err)
	}
}

// The probe's firmware really runs: under TCG, the real QEMU of each architecture prints
// its line. (So a KVM probe that fails fails because of KVM, not the firmware.)
func TestProbeFirmwareRunsOnEachArchitecture(t *testing.T) {
	for _, arch := range Architectures() {
		program, err := Binary(arch)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := probeGuest(context.Background(), program, arch, AccelTCG, 30*time.Second); err != nil {
			t.Fatalf("%s under tcg: %v", arch, err)
		}
		t.Logf("%s: the probe's guest wrote its line %s after QEMU's start", arch, time.Since(start).Round(time.Millisecond))
	}
}
