package hostplan

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

var eraser = &provisioner.Image{Kernel: &provisioner.File{URL: "http://e/k", Checksum: "sha256:ek"},
	Initramfs: &provisioner.File{URL: "http://e/i", Checksum: "sha256:ei"}, KernelArguments: "console=ttyS0"}

func wiped(status metav1.ConditionStatus, reason string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Status.Conditions = append(h.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionWiped, Status: status, Reason: reason})
	}
}
func wipeStarted(t time.Time) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.WipeStartedAt = &metav1.Time{Time: t} }
}
func erasing(n *provisioner.Node) { n.Image = *eraser }

func TestDecideWipe(t *testing.T) {
	now := time.Unix(10000, 0)
	dirty := wiped(metav1.ConditionFalse, metalv1alpha1.ReasonTenantData)
	for _, tc := range []struct {
		name       string
		in         Input
		action     Action
		state      metalv1alpha1.ProvisioningState
		op         metalv1alpha1.OperationalStatus
		wipeReason string
	}{
		{"provisioning a tenant's image marks the Host not wiped",
			Input{Host: host(wants(imgA)), Node: node(provisioner.StateAvailable), Eraser: eraser},
			ActionProvision, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonTenantData},
		{"a node seen deploying a tenant's image is marked, even if the first mark was lost",
			Input{Host: host(wants(imgA)), Node: node(provisioner.StateDeploying, running(imgA)), Eraser: eraser},
			ActionWait, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonTenantData},
		{"a node active with a tenant's image is marked",
			Input{Host: host(wants(imgA)), Node: node(provisioner.StateActive, running(imgA)), Eraser: eraser},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonTenantData},
		{"a released Host not wiped is not Available: the eraser is deployed",
			Input{Host: host(dirty), Node: node(provisioner.StateAvailable), Eraser: eraser},
			ActionWipe, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"a Host not wiped is wiped before a new image is provisioned",
			Input{Host: host(dirty, wants(imgB)), Node: node(provisioner.StateAvailable), Eraser: eraser},
			ActionWipe, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"the eraser deploying waits",
			Input{Host: host(dirty), Node: node(provisioner.StateDeploying, erasing), Eraser: eraser, Now: now},
			ActionWait, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"the eraser running (powered on) waits",
			Input{Host: host(dirty, wipeStarted(now.Add(-time.Minute))), Node: node(provisioner.StateActive, erasing, powered), Eraser: eraser, Now: now, WipeTimeout: time.Hour},
			ActionWait, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"the eraser powered the server off: wiped, torn down",
			Input{Host: host(dirty), Node: node(provisioner.StateActive, erasing), Eraser: eraser, Now: now},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiped},
		{"an eraser of unknown power is not taken for finished",
			Input{Host: host(dirty), Node: node(provisioner.StateActive, erasing, func(n *provisioner.Node) { n.PowerOn = nil }), Eraser: eraser, Now: now},
			ActionWait, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"wiped already, the eraser still deployed: torn down, nothing to mark",
			Input{Host: host(wiped(metav1.ConditionTrue, metalv1alpha1.ReasonWiped)), Node: node(provisioner.StateActive, erasing), Eraser: eraser, Now: now},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, ""},
		{"the eraser past its time-out: the wipe failed, torn down to try again",
			Input{Host: host(dirty, wipeStarted(now.Add(-2*time.Hour))), Node: node(provisioner.StateActive, erasing, powered), Eraser: eraser, Now: now, WipeTimeout: time.Hour},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalError, metalv1alpha1.ReasonWipeFailed},
		{"the eraser's deployment failed: the wipe failed",
			Input{Host: host(dirty), Node: node(provisioner.StateFailed, erasing, failedFrom(provisioner.OpProvision)), Eraser: eraser, Now: now},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalError, metalv1alpha1.ReasonWipeFailed},
		{"a failed wipe stays not wiped: back at Available, the eraser again, never Available",
			Input{Host: host(wiped(metav1.ConditionFalse, metalv1alpha1.ReasonWipeFailed)), Node: node(provisioner.StateAvailable), Eraser: eraser},
			ActionWipe, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonWiping},
		{"tearing a tenant's deployment down keeps the Host deprovisioning",
			Input{Host: host(dirty), Node: node(provisioner.StateCleaning), Eraser: eraser},
			ActionWait, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, ""},
		{"wiped and released: Available",
			Input{Host: host(wiped(metav1.ConditionTrue, metalv1alpha1.ReasonWiped)), Node: node(provisioner.StateAvailable), Eraser: eraser},
			ActionWait, metalv1alpha1.StateAvailable, metalv1alpha1.OperationalOK, ""},
		{"a site without an eraser does not wipe (Ironic's cleaning, or nothing)",
			Input{Host: host(dirty), Node: node(provisioner.StateAvailable)},
			ActionWait, metalv1alpha1.StateAvailable, metalv1alpha1.OperationalOK, ""},
		{"without an eraser, the eraser's image is any image",
			Input{Host: host(), Node: node(provisioner.StateActive, erasing)},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Action != tc.action || p.State != tc.state || p.Operational != tc.op || p.WipeReason != tc.wipeReason {
				t.Errorf("got %s %s %s wipe %q (%s); want %s %s %s wipe %q", p.Action, p.State, p.Operational, p.WipeReason, p.Message,
					tc.action, tc.state, tc.op, tc.wipeReason)
			}
			if p.Failed != (tc.op == metalv1alpha1.OperationalError) {
				t.Errorf("Failed = %v with operational status %s", p.Failed, p.Operational)
			}
		})
	}
}

func TestConcludeWipe(t *testing.T) {
	in := Input{Host: host(), Eraser: eraser}
	p, _ := Conclude(startWipe(in), Result{Outcome: OutcomeDone})
	if !p.WipeStarted || p.Failed {
		t.Errorf("an accepted eraser deployment starts the clock: %+v", p)
	}
	p, _ = Conclude(startWipe(in), Result{Outcome: OutcomeImageUnavailable, Message: "404"})
	if !p.Failed || p.WipeReason != metalv1alpha1.ReasonWipeFailed || p.Reason != metalv1alpha1.ReasonImageUnavailable || p.WipeStarted {
		t.Errorf("an eraser that cannot be fetched fails the wipe: %+v", p)
	}
	p, _ = Conclude(startWipe(in), Result{Outcome: OutcomeFailed, Message: "no"})
	if p.Reason != metalv1alpha1.ReasonWipeFailed || p.WipeReason != metalv1alpha1.ReasonWipeFailed {
		t.Errorf("a refused eraser deployment is a failed wipe: %+v", p)
	}
	p, _ = Conclude(startWipe(in), Result{Outcome: OutcomeBusy, Message: "queued"})
	if p.WipeStarted || p.Failed {
		t.Errorf("a queued eraser deployment has not started: %+v", p)
	}
}

// A site that erases but has no eraser for the Host's architecture: the wipe fails, decided
// without a call to the provisioner, and the Host stays out of reach.
func TestNoEraserForTheArchitecture(t *testing.T) {
	h := host(func(h *metalv1alpha1.Host) {
		h.Spec.Architecture = "arm64"
		meta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionWiped, Status: metav1.ConditionFalse, Reason: metalv1alpha1.ReasonTenantData})
	})
	p := Decide(Input{Host: h, Node: node(provisioner.StateAvailable), Eraser: &provisioner.Image{}})
	if p.Action != ActionWait || !p.Failed || p.State != metalv1alpha1.StateDeprovisioning || p.WipeReason != metalv1alpha1.ReasonWipeFailed ||
		p.Message != "Wipe: the site has no eraser for architecture arm64" {
		t.Errorf("no eraser for arm64: %+v", p)
	}
	if again, _ := Conclude(p, Result{Outcome: OutcomeDone}); again.WipeReason != metalv1alpha1.ReasonWipeFailed || !again.Failed {
		t.Errorf("concluded, the failure is lost: %+v", again)
	}
}
