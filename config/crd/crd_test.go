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

// Cluster API finds the version of an infrastructure kind only through this label on its CRD
// (its references carry group and kind, no version), and `clusterctl move` discovers only kinds
// whose CRD carries the clusterctl label; anvil's own CRDs stay out of both.
func TestClusterAPIProviderCRDsCarryTheContractLabels(t *testing.T) {
	crds, err := LoadClusterAPIProvider()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"anvilclusters.infrastructure.cluster.x-k8s.io":             true,
		"anvildatatemplates.infrastructure.cluster.x-k8s.io":        true,
		"anvilmachines.infrastructure.cluster.x-k8s.io":             true,
		"anvilmachinetemplates.infrastructure.cluster.x-k8s.io":     true,
		"anvilremediations.infrastructure.cluster.x-k8s.io":         true,
		"anvilremediationtemplates.infrastructure.cluster.x-k8s.io": true,
	}
	for _, c := range crds {
		if c.Name == "anvilclusteridentities.infrastructure.cluster.x-k8s.io" {
			// An admin's grant, never referenced by Cluster API nor moved by clusterctl.
			if _, ok := c.Labels["clusterctl.cluster.x-k8s.io"]; ok || c.Spec.Scope != "Cluster" {
				t.Errorf("%s: scope %s, labels %v; want cluster-scoped, not moved", c.Name, c.Spec.Scope, c.Labels)
			}
			continue
		}
		if !want[c.Name] {
			t.Errorf("unexpected CRD %s among the provider's", c.Name)
			continue
		}
		delete(want, c.Name)
		if v := c.Labels["cluster.x-k8s.io/v1beta2"]; v != "v1alpha1" || c.Spec.Versions[0].Name != v {
			t.Errorf("%s: label cluster.x-k8s.io/v1beta2=%q, served version %q; want both v1alpha1", c.Name, v, c.Spec.Versions[0].Name)
		}
		if _, ok := c.Labels["clusterctl.cluster.x-k8s.io"]; !ok {
			t.Errorf("%s: no clusterctl.cluster.x-k8s.io label, so clusterctl move would not see it", c.Name)
		}
		if c.Spec.Scope != "Namespaced" {
			t.Errorf("%s: scope %s, the contract wants Namespaced", c.Name, c.Spec.Scope)
		}
	}
	for name := range want {
		t.Errorf("%s missing", name)
	}
	anvil, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range anvil {
		if c.Spec.Group == "infrastructure.cluster.x-k8s.io" {
			t.Errorf("Load returns %s: the provider's CRDs would be installed where Cluster API is absent", c.Name)
		}
	}
}
