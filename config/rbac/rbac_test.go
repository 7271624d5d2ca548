package rbac

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/crd"
)

func TestLoadReadsEveryFolder(t *testing.T) {
	for _, dir := range []string{"", "broker", "capi", "capiprovider", "metal", "poollet", "tenant"} {
		objs, err := Load(dir)
		if err != nil || len(objs) == 0 {
			t.Errorf("Load(%q) = %d objects, %v", dir, len(objs), err)
		}
	}
	if _, err := Load("nothing-here"); err == nil {
		t.Error("Load of a missing folder: no error")
	}
}

// The policy that scopes a poollet finds its pool in the user name PoolletUser makes: the
// two must agree, or a poollet would be refused everything (or the policy match nobody).
func TestPoolletScopePolicyKnowsThePoolletsUserName(t *testing.T) {
	objs, err := admission.Load()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "'" + PoolletUser("") + "'"
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok || p.Name != "anvil-poollet-scope" {
			continue
		}
		var uses int
		for _, c := range p.Spec.MatchConditions {
			uses += strings.Count(c.Expression, prefix)
		}
		for _, v := range p.Spec.Variables {
			uses += strings.Count(v.Expression, prefix)
		}
		if uses != 2 {
			t.Errorf("anvil-poollet-scope names the poollets' user prefix %s %d times, want 2 (matchConditions and the pool variable)", prefix, uses)
		}
		return
	}
	t.Fatal("no policy anvil-poollet-scope in config/admission")
}

// Cluster API's manager creates, patches and deletes every kind of anvil's provider: a kind
// added to config/crd/capi without a rule here would fail only in a real install, where
// CAPI's own role is not wider than the contract promises.
func TestClusterAPIManagerRoleCoversEveryProviderKind(t *testing.T) {
	crds, err := crd.LoadClusterAPIProvider()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Load("capi")
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]map[string]bool{} // group/resource -> verbs
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" || o.GetLabels()["cluster.x-k8s.io/aggregate-to-manager"] != "true" {
			continue
		}
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if granted[g+"/"+res] == nil {
						granted[g+"/"+res] = map[string]bool{}
					}
					for _, v := range r.Verbs {
						granted[g+"/"+res][v] = true
					}
				}
			}
		}
	}
	for _, c := range crds {
		if c.Spec.Names.Kind == "AnvilClusterIdentity" {
			continue // an admin's grant to anvil's manager: Cluster API never touches it
		}
		key := c.Spec.Group + "/" + c.Spec.Names.Plural
		for _, v := range []string{"create", "delete", "get", "list", "patch", "update", "watch"} {
			if !granted[key][v] {
				t.Errorf("config/rbac/capi grants Cluster API's manager no %q on %s (a ClusterRole labelled cluster.x-k8s.io/aggregate-to-manager: \"true\")", v, key)
			}
		}
	}
}
