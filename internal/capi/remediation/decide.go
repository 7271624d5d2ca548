package remediation

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// Reasons of an AnvilRemediation's Ready condition.
const (
	ReasonTrying        = "Trying"
	ReasonWaitingForOff = "WaitingForPowerOff"
	ReasonGaveUp        = "GaveUp"
	ReasonMachineGone   = "MachineGone"
)

// DefaultStrategies are tried when a remediation names none (the CRD defaults them too).
var DefaultStrategies = []infrav1.RemediationStrategy{
	{Type: infrav1.RemediationReboot, Retries: 1, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
	{Type: infrav1.RemediationPowerCycle, Retries: 1, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
}

// Input is what the controller observed for one AnvilRemediation that is not being deleted.
type Input struct {
	Remediation *infrav1.AnvilRemediation
	// Machine is the anvil Machine of the remediated Cluster API Machine; nil if it is gone.
	Machine *computev1alpha1.Machine
	Now     time.Time
}

// Plan is what to do. Apply the anvil Machine's writes (Reboot, Power) first, then the
// Cluster API Machine's condition (GiveUp), then the status: a try is recorded only once
// made, and its reboot token is derived from the status, so making it again after a crash
// asks for the same reboot, not a second one.
type Plan struct {
	// Reboot is the compute.anvil.dev/reboot token to set on the anvil Machine; empty: none.
	Reboot string
	// Power is the anvil Machine's spec.power to set; empty: unchanged.
	Power computev1alpha1.Power
	// GiveUp sets the Cluster API Machine's OwnerRemediated condition to False, so its owner
	// replaces it.
	GiveUp bool
	// Status is the AnvilRemediation's status after the plan, but for Ready.
	Status infrav1.AnvilRemediationStatus
	// Ready is the AnvilRemediation's Ready condition.
	Ready metav1.Condition
	// After is when to look again if nothing changes; zero: only on a change.
	After time.Duration
}

// Decide plans the next step of a remediation.
func Decide(in Input) Plan {
	r := in.Remediation
	p := Plan{Status: *r.Status.DeepCopy()}
	st := &p.Status
	strategies := r.Spec.Strategies
	if len(strategies) == 0 {
		strategies = DefaultStrategies
	}
	if in.Machine == nil || in.Machine.DeletionTimestamp != nil {
		st.Phase = infrav1.RemediationPhaseFailed
		p.GiveUp = true
		p.ready(metav1.ConditionFalse, ReasonMachineGone, "the anvil Machine is gone or being deleted: Cluster API replaces the machine")
		return p
	}
	// A status pointing past the strategies (edited by hand) starts over at the first.
	if st.Phase != infrav1.RemediationPhaseInvalid && (st.Strategy < 0 || int(st.Strategy) >= len(strategies) || st.LastTriedAt == nil) {
		st.Phase = infrav1.RemediationPhaseInvalid
	}
	switch st.Phase {
	case infrav1.RemediationPhaseInvalid:
		p.start(r, strategies, 0, 1, in.Now)
	case infrav1.RemediationPhaseFailed:
		p.GiveUp = true
		p.ready(metav1.ConditionFalse, ReasonGaveUp, gaveUp(st.Tries))
	case infrav1.RemediationPhaseWaitingForPowerOff:
		s := strategies[st.Strategy]
		switch {
		case off(in.Machine):
			p.Power = computev1alpha1.PowerOn
			st.Phase = infrav1.RemediationPhaseRunning
			st.LastTriedAt = &metav1.Time{Time: in.Now}
			p.After = s.Timeout.Duration
			p.ready(metav1.ConditionTrue, ReasonTrying, trying(s, st))
		case in.Now.Before(st.LastTriedAt.Add(s.Timeout.Duration)):
			p.Power = computev1alpha1.PowerOff // asked again: idempotent
			p.After = st.LastTriedAt.Add(s.Timeout.Duration).Sub(in.Now)
			p.ready(metav1.ConditionTrue, ReasonWaitingForOff, fmt.Sprintf("try %d: waiting for the machine to power off", st.Tries))
		default:
			// It never went off: the try failed. Power it on again before the next.
			p.Power = computev1alpha1.PowerOn
			p.next(r, strategies, in.Now)
		}
	case infrav1.RemediationPhaseRunning:
		s := strategies[st.Strategy]
		if s.Type == infrav1.RemediationPowerCycle && in.Machine.Spec.Power == computev1alpha1.PowerOff {
			p.Power = computev1alpha1.PowerOn // the power-on of this try was not written
		}
		if deadline := st.LastTriedAt.Add(s.Timeout.Duration); in.Now.Before(deadline) {
			p.After = deadline.Sub(in.Now)
			p.ready(metav1.ConditionTrue, ReasonTrying, trying(s, st))
			return p
		}
		p.next(r, strategies, in.Now)
	}
	return p
}

// next moves to the following try: the same strategy again, the next strategy, or giving up.
func (p *Plan) next(r *infrav1.AnvilRemediation, strategies []infrav1.RemediationStrategy, now time.Time) {
	st := &p.Status
	switch {
	case st.Try < retries(strategies[st.Strategy]):
		p.start(r, strategies, st.Strategy, st.Try+1, now)
	case int(st.Strategy)+1 < len(strategies):
		p.start(r, strategies, st.Strategy+1, 1, now)
	default:
		st.Phase = infrav1.RemediationPhaseFailed
		p.GiveUp = true
		p.After = 0
		p.ready(metav1.ConditionFalse, ReasonGaveUp, gaveUp(st.Tries))
	}
}

// start makes try number try of strategy i.
func (p *Plan) start(r *infrav1.AnvilRemediation, strategies []infrav1.RemediationStrategy, i, try int32, now time.Time) {
	st := &p.Status
	s := strategies[i]
	st.Strategy, st.Try = i, try
	st.Tries++
	st.LastTriedAt = &metav1.Time{Time: now}
	p.After = s.Timeout.Duration
	switch s.Type {
	case infrav1.RemediationPowerCycle:
		p.Power = computev1alpha1.PowerOff
		st.Phase = infrav1.RemediationPhaseWaitingForPowerOff
		p.ready(metav1.ConditionTrue, ReasonWaitingForOff, fmt.Sprintf("try %d: waiting for the machine to power off", st.Tries))
	default:
		p.Reboot = Token(r, st.Tries)
		st.Phase = infrav1.RemediationPhaseRunning
		p.ready(metav1.ConditionTrue, ReasonTrying, trying(s, st))
	}
}

// Token is the reboot token of a remediation's try: the same for the same try, so a try
// made again after a crash asks for no second reboot.
func Token(r *infrav1.AnvilRemediation, try int32) string {
	return fmt.Sprintf("remediation-%s-%d", r.UID, try)
}

func retries(s infrav1.RemediationStrategy) int32 {
	return max(s.Retries, 1)
}

// off says whether the runtime reports the machine off after a power-off was asked.
func off(m *computev1alpha1.Machine) bool {
	return m.Spec.Power == computev1alpha1.PowerOff && m.Status.State == computev1alpha1.MachineStateShutdown
}

func trying(s infrav1.RemediationStrategy, st *infrav1.AnvilRemediationStatus) string {
	return fmt.Sprintf("try %d (%s %d of %d): waiting up to %s for the machine to be healthy", st.Tries, s.Type, st.Try, retries(s), s.Timeout.Duration)
}

func gaveUp(tries int32) string {
	return fmt.Sprintf("the machine was not healthy after %d tries: Cluster API replaces it", tries)
}

func (p *Plan) ready(status metav1.ConditionStatus, reason, msg string) {
	p.Ready = metav1.Condition{Type: infrav1.ConditionReady, Status: status, Reason: reason, Message: msg}
}
