package hostplan

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// StatusInput is what a Host's status is written from, once a reconcile has decided and
// carried out its plan.
type StatusInput struct {
	// Host as the reconcile read it (its status is the one before).
	Host *metalv1alpha1.Host
	// Plan is the concluded plan, its messages already redacted.
	Plan Plan
	// Node is what the provisioner holds for the Host (nil: nothing, or not asked).
	Node *provisioner.Node
	// HardwareKnown: the Host's hardware data exists. InspectionStarted: an inspection was
	// accepted in this reconcile; Inspected: its result was read in this reconcile.
	HardwareKnown, InspectionStarted, Inspected bool
	// Now is the reconcile's time: the wipe's clock.
	Now time.Time
}

// Status is the Host's status after the reconcile: the plan's state, error and power
// change, what the provisioner reports (its ID, power, the image the server runs), and the
// conditions Registered, Inspected, Provisioned, Wiped and Ready, each with a Reason.
func Status(in StatusInput) metalv1alpha1.HostStatus {
	h, p, n := in.Host, in.Plan, in.Node
	st := *h.Status.DeepCopy()
	st.ProvisioningState, st.OperationalStatus = p.State, p.Operational
	if p.Failed {
		st.LastError = p.Message
		st.ErrorCount++
	} else if p.Operational != metalv1alpha1.OperationalError {
		st.LastError, st.ErrorCount = "", 0
	}
	st.PowerChange = p.PowerChange
	if st.RebootToken == "" {
		// Lost with the status: the deployment record has it.
		st.RebootToken = RebootDone(h)
	}
	st.PowerState = metalv1alpha1.PowerUnknown
	if n != nil {
		if st.ProvisionerID != n.ID && !in.InspectionStarted {
			// A node registered anew (the provisioner lost its records): an inspection
			// started on the old one is void, and this one is inspected afresh.
			if c := meta.FindStatusCondition(st.Conditions, metalv1alpha1.ConditionInspected); c != nil && c.Reason == metalv1alpha1.ReasonInspecting {
				meta.RemoveStatusCondition(&st.Conditions, metalv1alpha1.ConditionInspected)
			}
		}
		st.ProvisionerID = n.ID
		if n.PowerOn != nil {
			st.PowerState = metalv1alpha1.PowerOff
			if *n.PowerOn {
				st.PowerState = metalv1alpha1.PowerOn
			}
		}
		switch n.State {
		case provisioner.StateActive:
			// What the server runs: kept so it is adopted, not re-imaged, if the
			// provisioner forgets it.
			if SameImage(h.Spec.Image, n.Image) {
				st.Image = h.Spec.Image.DeepCopy()
			}
		case provisioner.StateAvailable:
			st.Image = nil
		}
	}
	set := func(t string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: h.Generation}
		if ok {
			c.Status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	registered := n != nil && n.State != provisioner.StateEnrolling &&
		!(n.State == provisioner.StateFailed && n.FailedFrom == provisioner.OpRegister)
	regReason := metalv1alpha1.ReasonRegistered
	if !registered {
		regReason = metalv1alpha1.ReasonRegistering
		if p.Operational == metalv1alpha1.OperationalError && p.State == metalv1alpha1.StateRegistering {
			regReason = p.Reason
		}
	}
	set(metalv1alpha1.ConditionRegistered, registered, regReason, unlessTrue(registered, p.Message))
	switch {
	case in.HardwareKnown || in.Inspected:
		set(metalv1alpha1.ConditionInspected, true, metalv1alpha1.ReasonInspected, "")
	case in.InspectionStarted:
		set(metalv1alpha1.ConditionInspected, false, metalv1alpha1.ReasonInspecting, "")
	}
	provisioned := p.State == metalv1alpha1.StateProvisioned && st.Image != nil
	provReason := metalv1alpha1.ReasonNotProvisioned
	switch {
	case provisioned:
		provReason = metalv1alpha1.ReasonProvisioned
	case p.State == metalv1alpha1.StateProvisioning || p.State == metalv1alpha1.StateDeprovisioning:
		provReason = p.Reason
	}
	set(metalv1alpha1.ConditionProvisioned, provisioned, provReason, unlessTrue(provisioned, p.Message))
	wipeStatus(&st, h.Generation, p, in.Now)
	ready := p.Operational == metalv1alpha1.OperationalOK && !p.Busy &&
		(p.State == metalv1alpha1.StateAvailable || p.State == metalv1alpha1.StateProvisioned)
	set(metalv1alpha1.ConditionReady, ready, p.Reason, p.Message)
	return st
}

// wipeStatus writes the plan's Wiped condition and the eraser's clock.
func wipeStatus(st *metalv1alpha1.HostStatus, generation int64, p Plan, now time.Time) {
	if p.WipeReason != "" {
		status := metav1.ConditionFalse
		if p.WipeReason == metalv1alpha1.ReasonWiped {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionWiped, Status: status,
			Reason: p.WipeReason, Message: p.WipeMessage, ObservedGeneration: generation})
	}
	switch {
	case p.WipeReason == metalv1alpha1.ReasonWiped || p.WipeReason == metalv1alpha1.ReasonTenantData:
		st.WipeStartedAt = nil
	case p.Action == ActionWipe && p.WipeStarted, p.WipeStarted && st.WipeStartedAt == nil:
		st.WipeStartedAt = &metav1.Time{Time: now}
	}
}

// unlessTrue is the plan's message on a condition that is not true, where it explains why.
func unlessTrue(ok bool, msg string) string {
	if ok {
		return ""
	}
	return msg
}
