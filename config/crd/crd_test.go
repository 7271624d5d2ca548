package crd

import "testing"

func TestLoadReturnsEveryCommittedCRDSorted(t *testing.T) {
	crds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) == 0 {
		t.Fatal("no CRDs embedded")
	}
	seen := map[string]bool{}
	for i, c := range crds {
		if i > 0 && crds[i-1].Name >= c.Name {
			t.Errorf("CRDs not sorted: %s before %s", crds[i-1].Name, c.Name)
		}
		if c.Spec.Group == "" || len(c.Spec.Versions) == 0 {
			t.Errorf("CRD %s has no group or versions", c.Name)
		}
		seen[c.Name] = true
	}
	if !seen["machineclasses.compute.anvil.dev"] {
		t.Errorf("machineclasses.compute.anvil.dev missing from %v", seen)
	}
}
