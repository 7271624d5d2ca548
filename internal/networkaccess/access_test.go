package networkaccess

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestCheck(t *testing.T) {
	builders := computev1alpha1.NetworkAccess{Name: "anvil-builders", Builders: true}
	teamA := computev1alpha1.NetworkAccess{Name: "egress-a", Tenants: &computev1alpha1.TenantPolicy{Namespaces: []string{"team-a"}}}
	gold := computev1alpha1.NetworkAccess{Name: "gold", Tenants: &computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}}
	closed := computev1alpha1.NetworkAccess{Name: "closed"}
	served := []computev1alpha1.PoolNetwork{
		{Name: "anvil-builders", Forwards: []computev1alpha1.NetworkForward{{Guest: "10.0.2.100:5000", Target: "127.0.0.1:5000"}}},
		{Name: "egress-a", NAT: true},
		{Name: "undeclared-egress", NAT: true},
		{Name: "listed-but-empty"},
	}
	p := PoolFrom("p", []computev1alpha1.NetworkAccess{builders, teamA, gold, closed}, served)
	tenant := func(ns string) *Joiner { return &Joiner{Namespace: ns} }
	for _, c := range []struct {
		name     string
		j        *Joiner
		networks []string
		want     Code
		network  string
	}{
		{"no NICs", tenant("team-b"), nil, CodeNone, ""},
		{"a network the runtime gives nothing", tenant("team-b"), []string{"isolated", "listed-but-empty"}, CodeNone, ""},
		{"a tenant on the builders' network", tenant("team-b"), []string{"isolated", "anvil-builders"}, CodeBuildersOnly, "anvil-builders"},
		{"a builder on the builders' network", &Joiner{Namespace: "team-b", Builder: true}, []string{"anvil-builders"}, CodeNone, ""},
		{"a builder on another tenant's network", &Joiner{Namespace: "team-b", Builder: true}, []string{"egress-a"}, CodeNotATenant, "egress-a"},
		{"the allowed tenant", tenant("team-a"), []string{"egress-a"}, CodeNone, ""},
		{"another tenant", tenant("team-b"), []string{"egress-a"}, CodeNotATenant, "egress-a"},
		{"a served network nobody declared", tenant("team-a"), []string{"undeclared-egress"}, CodeUndeclared, "undeclared-egress"},
		{"an entry with no tenants", tenant("team-a"), []string{"closed"}, CodeNotATenant, "closed"},
		{"a namespace by label", &Joiner{Namespace: "x", NamespaceLabels: labels.Set{"tier": "gold"}}, []string{"gold"}, CodeNone, ""},
		{"a namespace without the label", &Joiner{Namespace: "x", NamespaceLabels: labels.Set{"tier": "tin"}}, []string{"gold"}, CodeNotATenant, "gold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Check(p, c.j, c.networks)
			if got.Code != c.want || got.Network != c.network {
				t.Fatalf("Check = %+v, want code %d on %q", got, c.want, c.network)
			}
			if c.want != CodeNone && !strings.Contains(got.String(), "spec.networks") {
				t.Errorf("the refusal %q does not say what to fix", got)
			}
		})
	}
	if !p.NeedsLabels([]string{"gold"}) || p.NeedsLabels([]string{"egress-a", "isolated"}) {
		t.Error("NeedsLabels is wrong")
	}
}
