package host

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// apply writes the plan and what the provisioner reported into the Host's status (in
// memory; patchStatus sends it).
func (s *step) apply() {
	h, p, n := s.host, s.plan, s.node
	st := &h.Status
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
		st.RebootToken = hostplan.RebootDone(h)
	}
	st.PowerState = metalv1alpha1.PowerUnknown
	if n != nil {
		if st.ProvisionerID != n.ID && !s.inspectStarted {
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
			if hostplan.SameImage(h.Spec.Image, n.Image) {
				st.Image = h.Spec.Image.DeepCopy()
			}
		case provisioner.StateAvailable:
			st.Image = nil
		}
	}
	gen := h.Generation
	set := func(t string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen}
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
	set(metalv1alpha1.ConditionRegistered, registered, regReason, conditionMessage(registered, p))
	switch {
	case s.hwKnown || s.inspected:
		set(metalv1alpha1.ConditionInspected, true, metalv1alpha1.ReasonInspected, "")
	case s.inspectStarted:
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
	set(metalv1alpha1.ConditionProvisioned, provisioned, provReason, conditionMessage(provisioned, p))
	s.applyWipe()
	ready := p.Operational == metalv1alpha1.OperationalOK && !p.Busy &&
		(p.State == metalv1alpha1.StateAvailable || p.State == metalv1alpha1.StateProvisioned)
	set(metalv1alpha1.ConditionReady, ready, p.Reason, p.Message)
}

// applyWipe writes the plan's Wiped condition and the eraser's clock.
func (s *step) applyWipe() {
	h, p, st := s.host, s.plan, &s.host.Status
	if p.WipeReason != "" {
		status := metav1.ConditionFalse
		if p.WipeReason == metalv1alpha1.ReasonWiped {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionWiped, Status: status,
			Reason: p.WipeReason, Message: p.WipeMessage, ObservedGeneration: h.Generation})
	}
	switch {
	case p.WipeReason == metalv1alpha1.ReasonWiped || p.WipeReason == metalv1alpha1.ReasonTenantData:
		st.WipeStartedAt = nil
	case p.Action == hostplan.ActionWipe && p.WipeStarted, p.WipeStarted && st.WipeStartedAt == nil:
		st.WipeStartedAt = &metav1.Time{Time: s.now}
	}
}

// conditionMessage repeats the plan's message on a condition that is not true, where it
// explains why.
func conditionMessage(ok bool, p hostplan.Plan) string {
	if ok {
		return ""
	}
	return p.Message
}

// patchStatus sends the status in one patch, only when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, h *metalv1alpha1.Host, before *metalv1alpha1.HostStatus) error {
	if equality.Semantic.DeepEqual(before, &h.Status) {
		return nil
	}
	after := h.Status
	base := h.DeepCopy()
	base.Status = *before
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	h.Status = after
	return r.Client.Status().Patch(ctx, h, patch)
}
