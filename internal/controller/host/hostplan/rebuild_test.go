package hostplan

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

func consumedBy(uid string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "t", Name: "m", UID: uid}
	}
}

// rebuildAsked sets the rebuild token of the n-th rebuild asked for uid.
func rebuildAsked(uid string, n int64) hostOpt {
	return func(h *metalv1alpha1.Host) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metalv1alpha1.AnnotationRebuild] = metalv1alpha1.RebuildToken(uid, n)
	}
}

func rebuilt(uid string, n int64) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.RebuildToken = metalv1alpha1.RebuildToken(uid, n) }
}

// A Host whose consumer asked to keep its server is rebuilt in place for a new image or a
// new token, and never deprovisioned (wiped) for it; every other image change still is.
func TestDecideRebuild(t *testing.T) {
	keeps := func(opts ...hostOpt) *metalv1alpha1.Host {
		return host(append([]hostOpt{consumedBy("uid-1"), rebuildAsked("uid-1", 2), rebuilt("uid-1", 1), ran(imgA), online}, opts...)...)
	}
	activeA := node(provisioner.StateActive, powered, running(imgA))
	for _, tc := range []struct {
		name   string
		in     Input
		action Action
		state  metalv1alpha1.ProvisioningState
		op     metalv1alpha1.OperationalStatus
	}{
		{"a new image for the consumer that asked is rebuilt", Input{Host: keeps(wants(imgB)), Node: activeA},
			ActionRebuild, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"a new token rebuilds the same image (a new config drive)", Input{Host: keeps(wants(imgA)), Node: activeA},
			ActionRebuild, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"the token carried out and the image written: provisioned", Input{Host: keeps(wants(imgA), rebuilt("uid-1", 2)), Node: activeA},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"the token carried out, another image on the server (adopted after Ironic lost a rebuild): rebuilt",
			Input{Host: keeps(wants(imgB), rebuilt("uid-1", 2)), Node: activeA},
			ActionRebuild, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"a rebuild deploying waits", Input{Host: keeps(wants(imgB), rebuilt("uid-1", 2)), Node: node(provisioner.StateDeploying, running(imgB))},
			ActionWait, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"a failed rebuild is rebuilt again, not deprovisioned",
			Input{Host: keeps(wants(imgB), rebuilt("uid-1", 2)), Node: node(provisioner.StateFailed, running(imgB), failedFrom(provisioner.OpProvision))},
			ActionRebuild, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError},
		{"a failed first deployment still goes back through deprovision",
			Input{Host: host(consumedBy("uid-1"), rebuildAsked("uid-1", 1), wants(imgA)), Node: node(provisioner.StateFailed, running(imgA), failedFrom(provisioner.OpProvision))},
			ActionDeprovision, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError},
		{"a released Host (image cleared) is deprovisioned whatever it was asked",
			Input{Host: keeps(), Node: activeA},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"a token another consumer left: a new image is written after a deprovision",
			Input{Host: keeps(wants(imgB), consumedBy("uid-2")), Node: activeA},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"a token another consumer left changes nothing for the image the server has",
			Input{Host: keeps(wants(imgA), consumedBy("uid-2")), Node: activeA},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"no consumer: a new image is written after a deprovision",
			Input{Host: host(rebuildAsked("uid-1", 2), ran(imgA), wants(imgB)), Node: activeA},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"an Available Host is provisioned, not rebuilt",
			Input{Host: host(consumedBy("uid-1"), rebuildAsked("uid-1", 2), wants(imgB)), Node: node(provisioner.StateAvailable)},
			ActionProvision, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range []Input{tc.in, withEraser(tc.in)} {
				p := Decide(in)
				if p.Action != tc.action || p.State != tc.state || p.Operational != tc.op || p.Reason == "" {
					t.Fatalf("eraser %v: Decide = %s %s %s (reason %q), want %s %s %s", in.Eraser != nil, p.Action, p.State, p.Operational, p.Reason,
						tc.action, tc.state, tc.op)
				}
				if p.Failed != (tc.op == metalv1alpha1.OperationalError) {
					t.Fatalf("Failed = %v with operational status %s", p.Failed, p.Operational)
				}
				// Where the site wipes, a rebuilt server keeps its mark: it still holds the
				// tenant's data and is wiped once released.
				if in.Eraser != nil && p.Action == ActionRebuild && p.WipeReason != metalv1alpha1.ReasonTenantData {
					t.Fatalf("a rebuild's Wiped reason is %q, want %s", p.WipeReason, metalv1alpha1.ReasonTenantData)
				}
			}
		})
	}
}

// withEraser is in on a site that wipes, its Host marked as holding a tenant's data once
// it ran an image.
func withEraser(in Input) Input {
	in.Host = in.Host.DeepCopy()
	if in.Host.Status.Image != nil {
		wiped(metav1.ConditionFalse, metalv1alpha1.ReasonTenantData)(in.Host)
	}
	in.Eraser = eraser
	return in
}

func TestConcludeRebuild(t *testing.T) {
	p, _ := Conclude(rebuild(Input{Host: host(wants(imgA))}, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonProvisioning, ""), Result{Outcome: OutcomeFailed, Message: "refused"})
	if !p.Failed || p.Reason != metalv1alpha1.ReasonProvisioningFailed || p.Message != "Rebuild: refused" {
		t.Errorf("a refused rebuild: %+v", p)
	}
	p, _ = Conclude(rebuild(Input{Host: host(wants(imgA))}, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonProvisioning, ""), Result{Outcome: OutcomeConfigDriveMissing, Message: "no Secret"})
	if !p.Failed || p.Reason != metalv1alpha1.ReasonConfigDriveMissing {
		t.Errorf("a rebuild without its config drive: %+v", p)
	}
}

func TestRebuildToken(t *testing.T) {
	for token, want := range map[string]string{
		metalv1alpha1.RebuildToken("ns/name/123", 4): "ns/name/123",
		metalv1alpha1.RebuildToken("uid", 1):         "uid",
		"":                                           "",
		"no-slash":                                   "",
		"/3":                                         "",
	} {
		if got := metalv1alpha1.RebuildConsumer(token); got != want {
			t.Errorf("RebuildConsumer(%q) = %q, want %q", token, got, want)
		}
	}
}
