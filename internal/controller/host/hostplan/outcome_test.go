package hostplan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

func TestConclude(t *testing.T) {
	planned := func(a Action) Plan {
		return Plan{Action: a, State: metalv1alpha1.StateProvisioning, Operational: metalv1alpha1.OperationalOK, Reason: "Planned"}
	}
	retry := planned(ActionRegister)
	retry.Failed, retry.Operational, retry.Reason, retry.Message = true, metalv1alpha1.OperationalError, metalv1alpha1.ReasonRegistrationFailed, "it broke"
	for _, tc := range []struct {
		name    string
		plan    Plan
		res     Result
		again   bool
		busy    bool
		failed  bool
		reason  string
		message string
	}{
		{"waiting is reported as decided", planned(ActionWait), Result{Outcome: OutcomeDone}, false, false, false, "Planned", ""},
		{"a registration is followed at once", planned(ActionRegister), Result{Outcome: OutcomeDone}, true, false, false, "Planned", ""},
		{"a retried registration keeps its failure until seen to work", retry, Result{Outcome: OutcomeDone}, false, false, true, metalv1alpha1.ReasonRegistrationFailed, "it broke"},
		{"read hardware is followed at once", planned(ActionReadHardware), Result{Outcome: OutcomeDone}, true, false, false, "Planned", ""},
		{"an accepted call is looked at again soon", planned(ActionProvide), Result{Outcome: OutcomeDone}, false, true, false, "Planned", ""},
		{"a node lost before the call is registered next time", planned(ActionDeprovision), Result{Outcome: OutcomeGone}, false, true, false, "Planned", ""},
		{"a queued call waits", planned(ActionProvision), Result{Outcome: OutcomeBusy, Message: "3 deploying"}, false, true, false, "Planned", "waiting for the provisioner: 3 deploying"},
		{"an unavailable provisioner is not the host's failure", planned(ActionPowerOn), Result{Outcome: OutcomeUnavailable, Message: "503"}, false, true, false,
			metalv1alpha1.ReasonProvisionerUnavailable, "the provisioner is overloaded or unreachable; retrying"},
		{"refused credentials", planned(ActionRegister), Result{Outcome: OutcomeFailed, Message: "HTTP 401 Unauthorized"}, false, false, true,
			metalv1alpha1.ReasonCredentialsInvalid, "Register: HTTP 401 Unauthorized"},
		{"an unreachable BMC", planned(ActionRegister), Result{Outcome: OutcomeFailed, Message: "connection refused"}, false, false, true,
			metalv1alpha1.ReasonBMCUnreachable, "Register: connection refused"},
		{"inspection", planned(ActionInspect), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonInspectionFailed, "Inspect: boom"},
		{"reading hardware", planned(ActionReadHardware), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonInspectionFailed, "ReadHardware: boom"},
		{"provisioning", planned(ActionProvision), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonProvisioningFailed, "Provision: boom"},
		{"adoption", planned(ActionAdopt), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonProvisioningFailed, "Adopt: boom"},
		{"deprovisioning", planned(ActionDeprovision), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonDeprovisioningFailed, "Deprovision: boom"},
		{"deletion", planned(ActionDelete), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonDeprovisioningFailed, "Delete: boom"},
		{"detaching", planned(ActionDetach), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonDeprovisioningFailed, "Detach: boom"},
		{"power", planned(ActionPowerOff), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonPowerChangeFailed, "PowerOff: boom"},
		{"the provisioner's lookup", planned(ActionWait), Result{Outcome: OutcomeFailed, Message: "boom"}, false, false, true, metalv1alpha1.ReasonRegistrationFailed, "Wait: boom"},
		{"an unreachable image", planned(ActionProvision), Result{Outcome: OutcomeImageUnavailable, Message: "GET x: 404"}, false, false, true, metalv1alpha1.ReasonImageUnavailable, "GET x: 404"},
		{"a wrong checksum", planned(ActionProvision), Result{Outcome: OutcomeImageChecksumMismatch, Message: "sha256 differs"}, false, false, true, metalv1alpha1.ReasonImageChecksumMismatch, "sha256 differs"},
		{"a missing config drive", planned(ActionProvision), Result{Outcome: OutcomeConfigDriveMissing, Message: "no Secret"}, false, false, true, metalv1alpha1.ReasonConfigDriveMissing, "no Secret"},
		{"an invalid outcome is never success", planned(ActionProvision), Result{Message: "?"}, false, false, true, metalv1alpha1.ReasonProvisioningFailed, "Provision: ?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, again := Conclude(tc.plan, tc.res)
			if again != tc.again || p.Busy != tc.busy || p.Failed != tc.failed || p.Reason != tc.reason || p.Message != tc.message {
				t.Fatalf("Conclude = %+v again %v;\nwant busy %v failed %v reason %s message %q again %v", p, again, tc.busy, tc.failed, tc.reason, tc.message, tc.again)
			}
			if p.Failed != (p.Operational == metalv1alpha1.OperationalError) {
				t.Fatalf("Failed %v with operational status %s", p.Failed, p.Operational)
			}
			if p.Action != tc.plan.Action || p.State != tc.plan.State {
				t.Fatalf("Conclude changed the action or state: %s %s", p.Action, p.State)
			}
		})
	}
}

// Whatever the action, an outcome that is not the Host's fault never marks it failed, and
// one that is never leaves it looking busy (which would poll instead of backing off).
func TestConcludeSeparatesWaitingFromFailing(t *testing.T) {
	for a := ActionWait; a <= ActionRemoveFinalizer; a++ {
		for o := OutcomeInvalid; o <= OutcomeConfigDriveMissing; o++ {
			p, _ := Conclude(Plan{Action: a, Operational: metalv1alpha1.OperationalOK}, Result{Outcome: o, Message: "m"})
			switch o {
			case OutcomeGone, OutcomeBusy, OutcomeUnavailable:
				if p.Failed || !p.Busy {
					t.Errorf("%s after %d: failed %v busy %v, want busy", a, o, p.Failed, p.Busy)
				}
			case OutcomeDone:
				if p.Failed {
					t.Errorf("%s done: failed", a)
				}
			default:
				if !p.Failed || p.Busy || p.Reason == "" || p.Message == "" {
					t.Errorf("%s after %d: %+v, want a failure with a reason and message", a, o, p)
				}
			}
		}
	}
}

// A Host being deleted lets go of its finalizer once the provisioner holds nothing of it:
// forgotten already, detached, or deleted (a Delete that finds the node gone included).
func TestConcludeReleases(t *testing.T) {
	deletingHost := host(func(h *metalv1alpha1.Host) { h.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })
	detached := deletingHost.DeepCopy()
	detached.Spec.Detached = true
	for _, tc := range []struct {
		name     string
		in       Input
		res      Result
		finalize bool
	}{
		{"forgotten: let go", Input{Host: deletingHost}, Result{Outcome: OutcomeDone}, true},
		{"deleted", Input{Host: deletingHost, Node: &provisioner.Node{State: provisioner.StateAvailable}}, Result{Outcome: OutcomeDone}, true},
		{"deleted already (not found)", Input{Host: deletingHost, Node: &provisioner.Node{State: provisioner.StateAvailable}}, Result{Outcome: OutcomeGone}, true},
		{"a delete refused keeps it", Input{Host: deletingHost, Node: &provisioner.Node{State: provisioner.StateAvailable}}, Result{Outcome: OutcomeFailed, Message: "no"}, false},
		{"a delete queued keeps it", Input{Host: deletingHost, Node: &provisioner.Node{State: provisioner.StateAvailable}}, Result{Outcome: OutcomeBusy}, false},
		{"detached", Input{Host: detached, Node: &provisioner.Node{State: provisioner.StateActive}}, Result{Outcome: OutcomeDone}, true},
		{"a detach that finds it gone: looked at again", Input{Host: detached, Node: &provisioner.Node{State: provisioner.StateActive}}, Result{Outcome: OutcomeGone}, false},
		{"deprovisioning first keeps it", Input{Host: deletingHost, Node: &provisioner.Node{State: provisioner.StateActive}}, Result{Outcome: OutcomeDone}, false},
		{"detached while not deleted keeps it", Input{Host: host(func(h *metalv1alpha1.Host) { h.Spec.Detached = true }), Node: &provisioner.Node{State: provisioner.StateActive}},
			Result{Outcome: OutcomeDone}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := Conclude(Decide(tc.in), tc.res)
			if p.Finalize != tc.finalize {
				t.Errorf("%s then %v: finalize %v, want %v", p.Action, tc.res.Outcome, p.Finalize, tc.finalize)
			}
		})
	}
}
