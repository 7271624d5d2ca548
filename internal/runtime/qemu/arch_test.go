package qemu

import (
	"reflect"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
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
