package host

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

func TestStatusEvents(t *testing.T) {
	cond := func(typ string, ok bool, reason string) metav1.Condition {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: "why: " + reason}
		if ok {
			c.Status = metav1.ConditionTrue
		}
		return c
	}
	status := func(state metalv1alpha1.ProvisioningState, op metalv1alpha1.OperationalStatus, img bool, conds ...metav1.Condition) *metalv1alpha1.HostStatus {
		st := &metalv1alpha1.HostStatus{ProvisioningState: state, OperationalStatus: op, Conditions: conds}
		if img {
			st.Image = &metalv1alpha1.HostImage{}
		}
		return st
	}
	ok := metalv1alpha1.OperationalOK
	registered := cond(metalv1alpha1.ConditionRegistered, true, metalv1alpha1.ReasonRegistered)
	inspected := cond(metalv1alpha1.ConditionInspected, true, metalv1alpha1.ReasonInspected)
	provisioned := cond(metalv1alpha1.ConditionProvisioned, true, metalv1alpha1.ReasonProvisioned)
	powerFailed := cond(metalv1alpha1.ConditionReady, false, metalv1alpha1.ReasonPowerChangeFailed)
	powering := func(st *metalv1alpha1.HostStatus, attempts, failures int32) *metalv1alpha1.HostStatus {
		st.PowerChange = &metalv1alpha1.PowerChange{Target: metalv1alpha1.PowerOn, Attempts: attempts, Failures: failures}
		if failures > 0 {
			st.LastError = "PowerOn failed"
		}
		return st
	}
	for _, tc := range []struct {
		name          string
		before, after *metalv1alpha1.HostStatus
		want          string // reasons, in order
	}{
		{"nothing changed", status(metalv1alpha1.StateAvailable, ok, false, registered), status(metalv1alpha1.StateAvailable, ok, false, registered), ""},
		{"registered", status(metalv1alpha1.StateRegistering, ok, false), status(metalv1alpha1.StateRegistering, ok, false, registered), "Registered"},
		{"inspected", status(metalv1alpha1.StateInspecting, ok, false, registered), status(metalv1alpha1.StateInspecting, ok, false, registered, inspected), "Inspected"},
		{"provisioned", status(metalv1alpha1.StateProvisioning, ok, false, registered, inspected),
			status(metalv1alpha1.StateProvisioned, ok, true, registered, inspected, provisioned), "Provisioned"},
		{"adopted", status(metalv1alpha1.StateProvisioned, ok, true),
			status(metalv1alpha1.StateProvisioned, ok, true, registered, provisioned, cond(metalv1alpha1.ConditionReady, true, metalv1alpha1.ReasonAdopted)), "Registered Adopted"},
		{"deprovisioned", status(metalv1alpha1.StateDeprovisioning, ok, true, registered, provisioned),
			status(metalv1alpha1.StateAvailable, ok, false, registered, cond(metalv1alpha1.ConditionProvisioned, false, metalv1alpha1.ReasonNotProvisioned)), "Deprovisioned"},
		{"wiped", status(metalv1alpha1.StateDeprovisioning, ok, false, cond(metalv1alpha1.ConditionWiped, false, metalv1alpha1.ReasonWiping)),
			status(metalv1alpha1.StateAvailable, ok, false, cond(metalv1alpha1.ConditionWiped, true, metalv1alpha1.ReasonWiped)), "Wiped"},
		{"wipe failed, once", status(metalv1alpha1.StateDeprovisioning, ok, false, cond(metalv1alpha1.ConditionWiped, false, metalv1alpha1.ReasonWiping)),
			status(metalv1alpha1.StateDeprovisioning, ok, false, cond(metalv1alpha1.ConditionWiped, false, metalv1alpha1.ReasonWipeFailed)), "WipeFailed"},
		{"wipe failed, still", status(metalv1alpha1.StateDeprovisioning, ok, false, cond(metalv1alpha1.ConditionWiped, false, metalv1alpha1.ReasonWipeFailed)),
			status(metalv1alpha1.StateDeprovisioning, ok, false, cond(metalv1alpha1.ConditionWiped, false, metalv1alpha1.ReasonWipeFailed)), ""},
		{"a failure", status(metalv1alpha1.StateProvisioning, ok, false),
			status(metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError, false, cond(metalv1alpha1.ConditionReady, false, metalv1alpha1.ReasonProvisioningFailed)), "ProvisioningFailed"},
		{"the same failure again", status(metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError, false, cond(metalv1alpha1.ConditionReady, false, metalv1alpha1.ReasonProvisioningFailed)),
			status(metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError, false, cond(metalv1alpha1.ConditionReady, false, metalv1alpha1.ReasonProvisioningFailed)), ""},
		{"power failed", status(metalv1alpha1.StateProvisioned, ok, true, provisioned),
			powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 1, 1), "PowerChangeFailed"},
		{"power failed again", powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 1, 1),
			powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 2, 2), "PowerChangeFailed"},
		{"power retried", powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 1, 1),
			powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 2, 1), ""},
		{"power restored", powering(status(metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError, true, provisioned, powerFailed), 2, 1),
			status(metalv1alpha1.StateProvisioned, ok, true, provisioned), "PowerRestored"},
		{"power switched", powering(status(metalv1alpha1.StateProvisioned, ok, true, provisioned), 1, 0),
			status(metalv1alpha1.StateProvisioned, ok, true, provisioned), ""},
	} {
		var got []string
		for _, e := range statusEvents(tc.before, tc.after) {
			got = append(got, e.reason)
			if e.note == "" {
				t.Errorf("%s: event %s has no note", tc.name, e.reason)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: events %v, want %q", tc.name, got, tc.want)
		}
	}
}
