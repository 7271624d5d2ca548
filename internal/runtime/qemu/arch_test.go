package qemu

import (
	"reflect"
	goruntime "runtime"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
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

func TestNativeOnlyWithKVMOnTheHostsOwnArchitecture(t *testing.T) {
	host := computev1alpha1.Architecture(goruntime.GOARCH)
	other := computev1alpha1.ArchitectureARM64
	if host == other {
		other = computev1alpha1.ArchitectureAMD64
	}
	for _, tc := range []struct {
		accel vm.Accel
		arch  computev1alpha1.Architecture
		want  bool
	}{
		{vm.AccelKVM, host, true},
		{vm.AccelKVM, other, false},
		{vm.AccelTCG, host, false},
		{vm.AccelTCG, other, false},
	} {
		if got := (&Config{Accel: tc.accel}).native(tc.arch); got != tc.want {
			t.Errorf("%s on %s: native = %v, want %v", tc.arch, tc.accel, got, tc.want)
		}
	}
}
