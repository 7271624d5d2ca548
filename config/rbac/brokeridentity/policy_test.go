package brokeridentity_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// anvil-broker-scope finds the broker's pool in the ServiceAccount name
// rbac.BrokerServiceAccount makes, and compares it with the label mapping.LabelPool names: if
// either drifted, a broker would be refused every write (or the policy match nobody).
func TestScopePolicyKnowsTheBrokersNameAndLabel(t *testing.T) {
	objs, err := admission.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok || p.Name != "anvil-broker-scope" {
			continue
		}
		var match, vars string
		for _, c := range p.Spec.MatchConditions {
			match += c.Expression
		}
		for _, v := range p.Spec.Variables {
			vars += v.Expression
		}
		if !strings.Contains(match, ":"+rbac.BrokerServiceAccountPrefix+"[^:]+$") {
			t.Errorf("anvil-broker-scope's match condition %q does not match ServiceAccounts named %s<pool>", match, rbac.BrokerServiceAccountPrefix)
		}
		if n := strings.Count(vars, "':"+rbac.BrokerServiceAccountPrefix+"'"); n != 2 {
			t.Errorf("anvil-broker-scope reads the pool after ':%s' %d times, want 2", rbac.BrokerServiceAccountPrefix, n)
		}
		if n := strings.Count(vars, "'"+mapping.LabelPool+"'"); n != 4 {
			t.Errorf("anvil-broker-scope names the label %s %d times, want 4 (before and after the write)", mapping.LabelPool, n)
		}
		return
	}
	t.Fatal("no policy anvil-broker-scope in config/admission")
}
