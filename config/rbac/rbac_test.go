package rbac

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/anvil-dev/anvil/config/admission"
)

func TestLoadReadsEveryFolder(t *testing.T) {
	for _, dir := range []string{"", "metal", "poollet", "tenant"} {
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
