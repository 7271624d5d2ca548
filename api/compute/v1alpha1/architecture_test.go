package v1alpha1_test

import (
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
)

// The Go list of architectures and the CRD's enum are written in two places (a marker and
// a slice); this keeps them equal.
func TestKnownArchitecturesMatchCRDEnum(t *testing.T) {
	crds, err := crd.Load()
	if err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, c := range crds {
		if c.Name != "machineclasses.compute.anvil.dev" {
			continue
		}
		for _, v := range c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["architecture"].Enum {
			enum = append(enum, string(v.Raw[1:len(v.Raw)-1]))
		}
	}
	if len(enum) != len(computev1alpha1.KnownArchitectures) {
		t.Fatalf("CRD enum %v, Go list %v", enum, computev1alpha1.KnownArchitectures)
	}
	for i, a := range computev1alpha1.KnownArchitectures {
		if string(a) != enum[i] {
			t.Errorf("architecture %d: Go %q, CRD %q", i, a, enum[i])
		}
		if !a.IsKnown() {
			t.Errorf("%q.IsKnown() = false", a)
		}
	}
	if computev1alpha1.Architecture("").IsKnown() || computev1alpha1.Architecture("x86_64").IsKnown() {
		t.Error("IsKnown accepts a name the API rejects")
	}
}
