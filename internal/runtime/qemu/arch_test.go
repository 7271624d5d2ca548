package qemu

import (
	"context"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

func TestParseArchitectures(t *testing.T) {
	got, err := ParseArchitectures([]string{"x86_64", "aarch64", "amd64", " arm64"})
	want := []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if _, err := ParseArchitectures([]string{"i386"}); err == nil {
		t.Fatal("i386 accepted")
	}
}

// The pool says how it runs each architecture and, for an emulated one, why: with
// --accel auto on a host whose KVM runs no guest, the runtime falls back to tcg and the
// pool's status carries the probe's finding; a KVM that works gives the host's
// architecture natively and the other emulated for being foreign.
func TestStatusSaysWhyEachArchitectureIsEmulated(t *testing.T) {
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	cfg.Accel = AccelAuto
	rt := newRuntime(t, cfg)
	st, err := rt.Status(context.Background(), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[mriv1alpha1.Architecture]string{}
	for _, r := range st.GetEmulationReasons() {
		reasons[r.GetArchitecture()] = r.GetReason()
	}
	native := map[mriv1alpha1.Architecture]bool{}
	for _, a := range st.GetNativeArchitectures() {
		native[a] = true
	}
	for _, a := range st.GetArchitectures() {
		if native[a] == (reasons[a] != "") {
			t.Errorf("%s: native %v, emulated because %q: exactly one of the two", a, native[a], reasons[a])
		}
	}
	host := mri.ArchToMRI(computev1alpha1.Architecture(goruntime.GOARCH))
	if rt.cfg.Accel == vm.AccelTCG && !strings.Contains(reasons[host], "KVM") {
		t.Errorf("auto chose tcg, the host's architecture emulated because %q: the reason names no KVM finding", reasons[host])
	}
	t.Logf("accelerator %s; emulated: %v", rt.cfg.Accel, reasons)
}
