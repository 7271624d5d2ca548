package hostplan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// conditions renders a status's conditions as "Type=Status/Reason" in a fixed order, the
// missing ones left out.
func conditions(st metalv1alpha1.HostStatus) string {
	var out []string
	for _, t := range []string{metalv1alpha1.ConditionRegistered, metalv1alpha1.ConditionInspected, metalv1alpha1.ConditionProvisioned,
		metalv1alpha1.ConditionWiped, metalv1alpha1.ConditionReady} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			out = append(out, fmt.Sprintf("%s=%s/%s", t, c.Status, c.Reason))
		}
	}
	return strings.Join(out, " ")
}

func TestStatus(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	node := func(st provisioner.State, power *bool, img *metalv1alpha1.HostImage) *provisioner.Node {
		n := &provisioner.Node{ID: "n1", State: st, PowerOn: power}
		if img != nil {
			n.Image = ImageOf(img)
		}
		return n
	}
	ok := func(st metalv1alpha1.ProvisioningState, reason string) Plan {
		return Plan{State: st, Operational: metalv1alpha1.OperationalOK, Reason: reason}
	}
	inspecting := func(h *metalv1alpha1.Host) {
		h.Status.ProvisionerID = "old"
		meta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionInspected, Status: metav1.ConditionFalse, Reason: metalv1alpha1.ReasonInspecting})
	}
	failedBefore := func(h *metalv1alpha1.Host) { h.Status.LastError, h.Status.ErrorCount = "earlier", 2 }
	for _, tc := range []struct {
		name  string
		in    StatusInput
		conds string
		check func(metalv1alpha1.HostStatus) string // "" when right
	}{
		{"registration refused: the plan's reason on Registered, the error counted",
			StatusInput{Host: host(failedBefore), Plan: Plan{State: metalv1alpha1.StateRegistering, Operational: metalv1alpha1.OperationalError,
				Reason: metalv1alpha1.ReasonCredentialsInvalid, Message: "the BMC refused the credentials", Failed: true}},
			"Registered=False/CredentialsInvalid Provisioned=False/NotProvisioned Ready=False/CredentialsInvalid",
			func(st metalv1alpha1.HostStatus) string {
				if st.LastError != "the BMC refused the credentials" || st.ErrorCount != 3 || st.PowerState != metalv1alpha1.PowerUnknown {
					return fmt.Sprintf("lastError %q, errorCount %d, power %s", st.LastError, st.ErrorCount, st.PowerState)
				}
				return ""
			}},
		{"available and off: ready, power read, no image, the error forgotten",
			StatusInput{Host: host(failedBefore), Plan: ok(metalv1alpha1.StateAvailable, metalv1alpha1.ReasonReady), Node: node(provisioner.StateAvailable, &off, nil), HardwareKnown: true},
			"Registered=True/Registered Inspected=True/Inspected Provisioned=False/NotProvisioned Ready=True/Ready",
			func(st metalv1alpha1.HostStatus) string {
				if st.LastError != "" || st.ErrorCount != 0 || st.PowerState != metalv1alpha1.PowerOff || st.Image != nil || st.ProvisionerID != "n1" {
					return fmt.Sprintf("lastError %q, errorCount %d, power %s, image %v, id %q", st.LastError, st.ErrorCount, st.PowerState, st.Image, st.ProvisionerID)
				}
				return ""
			}},
		{"provisioned with the image asked: kept in the status",
			StatusInput{Host: host(wants(imgA)), Plan: ok(metalv1alpha1.StateProvisioned, metalv1alpha1.ReasonReady), Node: node(provisioner.StateActive, &on, imgA)},
			"Registered=True/Registered Provisioned=True/Provisioned Ready=True/Ready",
			func(st metalv1alpha1.HostStatus) string {
				if st.Image == nil || st.Image.URL != imgA.URL || st.PowerState != metalv1alpha1.PowerOn {
					return fmt.Sprintf("image %v, power %s", st.Image, st.PowerState)
				}
				return ""
			}},
		{"active with another image than asked: not provisioned with it",
			StatusInput{Host: host(wants(imgB)), Plan: ok(metalv1alpha1.StateProvisioned, metalv1alpha1.ReasonReady), Node: node(provisioner.StateActive, &on, imgA)},
			"Registered=True/Registered Provisioned=False/NotProvisioned Ready=True/Ready",
			func(st metalv1alpha1.HostStatus) string {
				if st.Image != nil {
					return fmt.Sprintf("image %v, want none", st.Image)
				}
				return ""
			}},
		{"provisioning: the plan's reason on Provisioned",
			StatusInput{Host: host(wants(imgA)), Plan: Plan{State: metalv1alpha1.StateProvisioning, Operational: metalv1alpha1.OperationalOK,
				Reason: metalv1alpha1.ReasonProvisioning, Busy: true}, Node: node(provisioner.StateDeploying, &on, imgA)},
			"Registered=True/Registered Provisioned=False/Provisioning Ready=False/Provisioning", nil},
		{"a node registered anew: the old inspection is void",
			StatusInput{Host: host(inspecting), Plan: ok(metalv1alpha1.StateRegistering, metalv1alpha1.ReasonRegistering), Node: node(provisioner.StateEnrolling, nil, nil)},
			"Registered=False/Registering Provisioned=False/NotProvisioned Ready=False/Registering", nil},
		{"an inspection started now on the new node",
			StatusInput{Host: host(inspecting), Plan: ok(metalv1alpha1.StateInspecting, metalv1alpha1.ReasonInspecting), Node: node(provisioner.StateManageable, &off, nil), InspectionStarted: true},
			"Registered=True/Registered Inspected=False/Inspecting Provisioned=False/NotProvisioned Ready=False/Inspecting", nil},
		{"the eraser deployed: the wipe's clock starts",
			StatusInput{Host: host(), Plan: func() Plan { p := startWipe(Input{Host: host(), Eraser: eraser}); p.WipeStarted = true; return p }(), Node: node(provisioner.StateDeploying, &on, nil), Now: now},
			"Registered=True/Registered Provisioned=False/Wiping Wiped=False/Wiping Ready=False/Wiping",
			func(st metalv1alpha1.HostStatus) string {
				if st.WipeStartedAt == nil || !st.WipeStartedAt.Time.Equal(now) {
					return fmt.Sprintf("wipeStartedAt %v, want %v", st.WipeStartedAt, now)
				}
				return ""
			}},
		{"wiped: the clock stops",
			StatusInput{Host: host(func(h *metalv1alpha1.Host) { h.Status.WipeStartedAt = &metav1.Time{Time: now.Add(-time.Minute)} }),
				Plan: Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
					Reason: metalv1alpha1.ReasonWiping, Busy: true, WipeReason: metalv1alpha1.ReasonWiped}, Node: node(provisioner.StateActive, &off, nil), Now: now},
			"Registered=True/Registered Provisioned=False/Wiping Wiped=True/Wiped Ready=False/Wiping",
			func(st metalv1alpha1.HostStatus) string {
				if st.WipeStartedAt != nil {
					return fmt.Sprintf("wipeStartedAt %v, want none", st.WipeStartedAt)
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.Host.DeepCopy()
			st := Status(tc.in)
			if got := conditions(st); got != tc.conds {
				t.Errorf("conditions\n %s\nwant\n %s", got, tc.conds)
			}
			if tc.check != nil {
				if msg := tc.check(st); msg != "" {
					t.Error(msg)
				}
			}
			if !equality.Semantic.DeepEqual(before, tc.in.Host) {
				t.Error("Status changed the Host it was given")
			}
		})
	}
}

// Whatever the plan and the node: every condition carries a Reason and the Host's
// generation, Ready is True only for a Host that is OK, idle and Available or Provisioned,
// Provisioned only with an image in the status, and a failure always leaves its message.
func TestStatusProperty(t *testing.T) {
	states := []metalv1alpha1.ProvisioningState{metalv1alpha1.StateRegistering, metalv1alpha1.StateInspecting, metalv1alpha1.StateAvailable,
		metalv1alpha1.StateProvisioning, metalv1alpha1.StateProvisioned, metalv1alpha1.StateDeprovisioning}
	reasons := []string{metalv1alpha1.ReasonReady, metalv1alpha1.ReasonRegistering, metalv1alpha1.ReasonProvisioning, metalv1alpha1.ReasonWiping,
		metalv1alpha1.ReasonPowerChangeFailed, metalv1alpha1.ReasonProvisioningFailed}
	nodeStates := []provisioner.State{provisioner.StateEnrolling, provisioner.StateManageable, provisioner.StateAvailable,
		provisioner.StateDeploying, provisioner.StateActive, provisioner.StateFailed}
	rapid.Check(t, func(t *rapid.T) {
		h := host(wants(rapid.SampledFrom([]*metalv1alpha1.HostImage{nil, imgA, imgB}).Draw(t, "wants")))
		h.Generation = rapid.Int64Range(1, 9).Draw(t, "generation")
		p := Plan{State: rapid.SampledFrom(states).Draw(t, "state"), Reason: rapid.SampledFrom(reasons).Draw(t, "reason"),
			Operational: rapid.SampledFrom([]metalv1alpha1.OperationalStatus{metalv1alpha1.OperationalOK, metalv1alpha1.OperationalError}).Draw(t, "operational"),
			Busy:        rapid.Bool().Draw(t, "busy"), Failed: rapid.Bool().Draw(t, "failed"), Message: rapid.StringMatching(`[a-z ]{0,12}`).Draw(t, "message"),
			WipeReason: rapid.SampledFrom([]string{"", metalv1alpha1.ReasonWiping, metalv1alpha1.ReasonWiped, metalv1alpha1.ReasonTenantData}).Draw(t, "wipe")}
		var n *provisioner.Node
		if rapid.Bool().Draw(t, "node") {
			n = &provisioner.Node{ID: "n", State: rapid.SampledFrom(nodeStates).Draw(t, "nodeState")}
			if img := rapid.SampledFrom([]*metalv1alpha1.HostImage{nil, imgA, imgB}).Draw(t, "runs"); img != nil {
				n.Image = ImageOf(img)
			}
		}
		st := Status(StatusInput{Host: h, Plan: p, Node: n, HardwareKnown: rapid.Bool().Draw(t, "hw"),
			InspectionStarted: rapid.Bool().Draw(t, "started"), Now: time.Unix(1, 0)})
		for _, c := range st.Conditions {
			if c.Reason == "" || c.ObservedGeneration != h.Generation {
				t.Fatalf("condition %s: reason %q, observedGeneration %d (generation %d)", c.Type, c.Reason, c.ObservedGeneration, h.Generation)
			}
		}
		ready := meta.IsStatusConditionTrue(st.Conditions, metalv1alpha1.ConditionReady)
		if ready && (p.Operational != metalv1alpha1.OperationalOK || p.Busy || (p.State != metalv1alpha1.StateAvailable && p.State != metalv1alpha1.StateProvisioned)) {
			t.Fatalf("Ready True for plan %+v", p)
		}
		if meta.IsStatusConditionTrue(st.Conditions, metalv1alpha1.ConditionProvisioned) && st.Image == nil {
			t.Fatal("Provisioned True without an image in the status")
		}
		if p.Failed && st.LastError != p.Message {
			t.Fatalf("a failed plan left lastError %q, want %q", st.LastError, p.Message)
		}
	})
}
