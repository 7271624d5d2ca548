package hostplan

import (
	"fmt"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// Outcome is what carrying out a plan's action came to. The zero value is invalid.
type Outcome int

const (
	OutcomeInvalid Outcome = iota
	// OutcomeDone: the provisioner accepted the call (or there was none to make).
	OutcomeDone
	// OutcomeGone: the provisioner lost the Host between the look and the call.
	OutcomeGone
	// OutcomeBusy: the call is queued behind the provisioner's concurrency limit, or the
	// server is locked for a moment.
	OutcomeBusy
	// OutcomeUnavailable: the provisioner is overloaded or cannot be reached.
	OutcomeUnavailable
	// OutcomeFailed: the provisioner refused or failed the call; Result.Message says why.
	OutcomeFailed
	// The checks made before provisioning, which refuse the call without making it:
	OutcomeImageUnavailable
	OutcomeImageChecksumMismatch
	OutcomeConfigDriveMissing
)

// Result is an Outcome and its message.
type Result struct {
	Outcome Outcome
	Message string
}

// Conclude returns the plan to report once its action came to r, and whether the Host
// should be decided on again at once: after a registration or a hardware read, whose
// effect is known without asking the provisioner, the next step need not wait a poll.
func Conclude(p Plan, r Result) (Plan, bool) {
	// A Delete that finds the node gone has nothing left to delete: the Host is released.
	p.Finalize = p.Releases && (r.Outcome == OutcomeDone || r.Outcome == OutcomeGone && p.Action == ActionDelete)
	p, again := conclude(p, r)
	p = concludePower(p, r)
	if p.Action == ActionWipe {
		switch {
		case p.Failed:
			// The wipe's failure is the Wiped condition's too: the Host is not handed out.
			p.WipeReason, p.WipeMessage = metalv1alpha1.ReasonWipeFailed, p.Message
		case r.Outcome == OutcomeDone:
			// The eraser is on its way: its time-out counts from now.
			p.WipeStarted = true
		}
	}
	return p, again
}

func conclude(p Plan, r Result) (Plan, bool) {
	switch r.Outcome {
	case OutcomeDone:
		switch p.Action {
		case ActionWait:
			return p, false
		case ActionRegister:
			// A registration retried after a failure keeps reporting that failure until a
			// later look finds the retry worked.
			return p, !p.Failed
		case ActionReadHardware:
			return p, true
		}
		// The provisioner carries calls out asynchronously: look again soon for the result.
		p.Busy = true
	case OutcomeGone:
		// The next look registers it again.
		p.Busy = true
	case OutcomeBusy:
		p.Busy, p.Failed = true, false
		p.Message = "waiting for the provisioner: " + r.Message
	case OutcomeUnavailable:
		p.Busy, p.Failed = true, false
		p.Reason = metalv1alpha1.ReasonProvisionerUnavailable
		p.Message = "the provisioner is overloaded or unreachable; retrying"
	case OutcomeImageUnavailable:
		p = failure(p, metalv1alpha1.ReasonImageUnavailable, r.Message)
	case OutcomeImageChecksumMismatch:
		p = failure(p, metalv1alpha1.ReasonImageChecksumMismatch, r.Message)
	case OutcomeConfigDriveMissing:
		p = failure(p, metalv1alpha1.ReasonConfigDriveMissing, r.Message)
	default: // OutcomeFailed, and an invalid Outcome is reported as a failure, never as success
		reason := failureReason(p.Action)
		if p.Action == ActionRegister {
			reason = RegistrationReason(r.Message)
		}
		p = failure(p, reason, fmt.Sprintf("%s: %s", p.Action, r.Message))
	}
	return p, false
}

func failure(p Plan, reason, msg string) Plan {
	p.Failed, p.Busy = true, false
	p.Operational, p.Reason, p.Message = metalv1alpha1.OperationalError, reason, msg
	return p
}

// failureReason names the Ready condition's Reason for a failed action.
func failureReason(a Action) string {
	switch a {
	case ActionInspect, ActionReadHardware:
		return metalv1alpha1.ReasonInspectionFailed
	case ActionProvision, ActionAdopt, ActionRebuild:
		return metalv1alpha1.ReasonProvisioningFailed
	case ActionDeprovision, ActionDelete, ActionDetach:
		return metalv1alpha1.ReasonDeprovisioningFailed
	case ActionPowerOn, ActionPowerOff:
		return metalv1alpha1.ReasonPowerChangeFailed
	case ActionWipe:
		return metalv1alpha1.ReasonWipeFailed
	}
	return metalv1alpha1.ReasonRegistrationFailed
}
