package machineplan

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Kind is what an Action asks the poollet to do.
type Kind int

const (
	// KindInvalid is the zero Kind; Next never returns it.
	KindInvalid Kind = iota
	// DeleteGarbage deletes the runtime machines Action.IDs (Sort's Delete).
	DeleteGarbage
	// AddFinalizer adds the runtime-machine finalizer to a Machine its user pinned to the
	// pool (the scheduler adds it to those it binds).
	AddFinalizer
	// Create resolves the runtime spec and asks the runtime for a machine; Problem,
	// Refused or Created records the outcome.
	Create
	// Reimage resolves the image (TargetOf) and the first-boot config and asks the runtime
	// to boot them in place; Problem, RefusedReimage or Reimaging records the outcome.
	Reimage
	// CheckFirstBoot reads the Machine's first-boot config, whose spec changed, to tell
	// whether the running machine booted it; Problem or FirstBoot records the outcome.
	CheckFirstBoot
	// SetPower asks the runtime for Action.Power; Answered records the runtime's machine.
	SetPower
	// Reboot asks the runtime to reboot for Action.Token; Answered records its machine.
	Reboot
	// DeleteRuntime asks the runtime to delete the Machine's machine (the Machine is being
	// deleted) and lists again; Deleted records what is left.
	DeleteRuntime
	// MarkTerminating merge-patches Action.Status (the runtime is still deleting) and ends
	// the pass as Wait does.
	MarkTerminating
	// RemoveFinalizer lets the Machine go, then records Action.Events; the pass ends.
	RemoveFinalizer
	// WriteStatus writes Action.Status when it differs from the stored one, records
	// Action.Events once written, and ends the pass, looking again after Action.After. A
	// write skipped on a stale copy asks for a quick retry, unless StaleIsFine.
	WriteStatus
	// Wait ends the pass: look again after Action.After (0: on the next event only).
	Wait
)

// Action is one step of a pass.
type Action struct {
	Kind Kind
	// IDs to delete (DeleteGarbage).
	IDs []string
	// Power to set (SetPower).
	Power mriv1alpha1.Power
	// Token of the reboot asked (Reboot).
	Token string
	// Status to write (WriteStatus, MarkTerminating).
	Status *computev1alpha1.MachineStatus
	// StaleIsFine: a WriteStatus skipped on a stale copy ends the pass with After, as a
	// written one does.
	StaleIsFine bool
	// After is when to look again (WriteStatus, MarkTerminating, Wait).
	After time.Duration
	// Events to record once the write is done.
	Events []Event
}

// Ends reports whether the pass is over after the action.
func (a Action) Ends() bool {
	switch a.Kind {
	case MarkTerminating, RemoveFinalizer, WriteStatus, Wait:
		return true
	}
	return false
}

// Event is an Event a person looks for on the Machine.
type Event struct {
	Warning bool
	Reason  string
	Action  string
	Message string
}

// Pass is one reconcile of one Machine bound to Pool.
type Pass struct {
	Pool string
	// ServesConsoles says the pool's poollet serves consoles (ConsoleAvailable).
	ServesConsoles bool
	Machine        *computev1alpha1.Machine
	// Runtime is the Machine's runtime machine (Sort's Mine), nil when it has none; each
	// runtime call's answer replaces it.
	Runtime *mriv1alpha1.Machine
	// Garbage are Sort's Delete.
	Garbage []string
	// Now is the time; the poollet sets it before each Next.
	Now time.Time
	// StuckAfter is how long a runtime step may lag before its call is repeated (a runtime
	// may lose a step; every MRI call is idempotent); 0 never repeats.
	StuckAfter time.Duration
	// Lag is what the poollet remembered of Runtime; Lag() is what to remember after.
	Lag Lag
	// SecretUnreadSince is since when the Machine's first-boot Secret could not be read,
	// for its UID and generation; zero when its last read did not fail so.
	SecretUnreadSince time.Time

	path       path
	stage      int
	hadRuntime bool
	// found are the conditions the pass found besides the runtime's view: what keeps the
	// Machine from its runtime machine or from its new spec, and whether the running
	// machine booted its first-boot config. The first matters most.
	found     []metav1.Condition
	refused   string
	reimaging *metav1.Condition
}

// path is what the pass does with the Machine, chosen on its first step.
type path int

const (
	pathUndecided path = iota
	pathDelete         // the Machine is being deleted
	pathCreate         // it has no runtime machine
	pathUpdate         // its runtime machine is brought to its spec
)

// Next is the pass's next action.
func (p *Pass) Next() Action {
	if len(p.Garbage) > 0 {
		ids := p.Garbage
		p.Garbage = nil
		return Action{Kind: DeleteGarbage, IDs: ids}
	}
	m := p.Machine
	if p.path == pathUndecided {
		p.hadRuntime = p.Runtime != nil
		switch {
		case !m.DeletionTimestamp.IsZero():
			p.path = pathDelete
		case p.Runtime == nil:
			p.path = pathCreate
		default:
			p.path = pathUpdate
		}
		if p.path != pathDelete && !controllerutil.ContainsFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) {
			// A Machine pinned by its user: the scheduler never added the finalizer.
			return Action{Kind: AddFinalizer}
		}
	}
	switch p.path {
	case pathDelete:
		return p.nextDeleting()
	case pathCreate:
		return p.nextCreate()
	}
	return p.nextUpdate()
}

// nextDeleting deletes the runtime machine, and lets the Machine go once the runtime says
// it is gone. Terminating is written only while the runtime is still at it: a runtime
// that deletes at once costs the Machine no extra write.
func (p *Pass) nextDeleting() Action {
	m := p.Machine
	switch p.stage {
	case 0:
		p.stage = 1
		if p.Runtime != nil {
			return Action{Kind: DeleteRuntime}
		}
		fallthrough
	case 1:
		if p.Runtime != nil {
			// The runtime's DELETED event brings the poollet back; until then the finalizer
			// holds. A machine that goes while the event stream is down (the runtime
			// restarting) sends none, and a reopened stream lists only what is left: look
			// again after StuckAfter.
			if m.Status.State == computev1alpha1.MachineStateTerminating {
				return Action{Kind: Wait, After: p.StuckAfter}
			}
			st := m.Status.DeepCopy()
			st.State = computev1alpha1.MachineStateTerminating
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReady,
				Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonTerminating, Message: "the runtime is deleting the machine"})
			return Action{Kind: MarkTerminating, Status: st, After: p.StuckAfter}
		}
		p.stage = 2
		if controllerutil.ContainsFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) {
			a := Action{Kind: RemoveFinalizer}
			if p.hadRuntime || m.Status.MachineID != "" {
				a.Events = []Event{{Reason: computev1alpha1.EventDeleted, Action: "Delete",
					Message: "the runtime machine is gone from MachinePool " + p.Pool}}
			}
			return a
		}
	}
	return Action{Kind: Wait}
}

// nextCreate asks the runtime for a machine; a refusal hands the Machine back to the
// scheduler, and what its user must fix (a missing Secret, class or image) is a
// condition, looked at again after a while (lookAgain), not a retry loop.
func (p *Pass) nextCreate() Action {
	switch {
	case p.stage == 0:
		p.stage = 1
		return Action{Kind: Create}
	case p.refused != "":
		return p.writeCondition(metav1.Condition{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonRuntimeRefused, Message: fmt.Sprintf("MachinePool %s refused the machine: %s", p.Pool, p.refused)}, 0)
	case p.Runtime == nil && len(p.found) > 0:
		return p.writeCondition(p.found[0], p.lookAgain(p.found[0]))
	case p.Runtime == nil:
		return Action{Kind: Wait} // Created always records a machine
	}
	return p.report()
}

// nextUpdate brings an existing runtime machine to the Machine's image, power and reboot
// requests, then reports.
func (p *Pass) nextUpdate() Action {
	m, rm := p.Machine, p.Runtime
	switch p.stage {
	case 0:
		p.stage = 1
		if WantsReimage(m, rm) {
			p.stage = 2 // a new first-boot config is part of the reimage
			return Action{Kind: Reimage}
		}
		if m.Generation != m.Status.ObservedGeneration {
			// The spec changed: a new first-boot config waits for the next reimage.
			return Action{Kind: CheckFirstBoot}
		}
		fallthrough
	case 1, 2:
		if p.reimaging != nil {
			// The runtime's events bring the Machine back; report writes Reimaged once the
			// runtime runs the new image.
			return p.writeCondition(*p.reimaging, p.StuckAfter)
		}
		p.stage = 3
		want := mri.PowerToMRI(m.Spec.Power)
		if rm.GetSpec().GetPower() != want {
			return Action{Kind: SetPower, Power: want}
		}
		var repeat bool
		if repeat, p.Lag = stuck(rm, p.Lag, p.Now, p.StuckAfter); repeat {
			return Action{Kind: SetPower, Power: want}
		}
		fallthrough
	case 3:
		p.stage = 4
		if token := m.Annotations[computev1alpha1.AnnotationReboot]; token != "" && rm.GetStatus().GetRebootToken() != token {
			return Action{Kind: Reboot, Token: token}
		}
	}
	return p.report()
}

// report writes the runtime's view once it is settled, with the problems the pass found;
// until then it waits for the runtime's next event, with a timed retry in case that step
// was lost.
func (p *Pass) report() Action {
	m, rm := p.Machine, p.Runtime
	var retry time.Duration
	for _, c := range p.found {
		if c.Status == metav1.ConditionFalse && c.Type != computev1alpha1.ConditionFirstBootUpToDate {
			// The user's fix (a Secret, a registry) or a Secret's grant is not watched.
			if after := p.lookAgain(c); retry == 0 || after < retry {
				retry = after
			}
		}
	}
	if !Settled(rm) {
		if len(p.found) > 0 {
			return p.writeCondition(p.found[0], retry)
		}
		if m.Status.MachineID == "" {
			st := m.Status.DeepCopy()
			st.MachineID, st.Pool, st.State = rm.GetMetadata().GetId(), p.Pool, computev1alpha1.MachineStatePending
			return Action{Kind: WriteStatus, Status: st, StaleIsFine: true, After: p.StuckAfter}
		}
		return Action{Kind: Wait, After: p.StuckAfter}
	}
	st := ObservedStatus(m, rm, p.Pool, p.ServesConsoles)
	for _, c := range p.found {
		c.ObservedGeneration = m.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	ended := reimageEnded(&st, m, rm)
	events := stateEvent(p.Pool, m.Status.State, st.State, rm)
	if ended {
		events = append(events, Event{Reason: computev1alpha1.ReasonReimaged, Action: "Reimage",
			Message: fmt.Sprintf("running %s on MachinePool %s", m.Spec.Image, p.Pool)})
	}
	return Action{Kind: WriteStatus, Status: &st, After: retry, Events: events}
}

// writeCondition writes one condition into the Machine's status (Pending, while it has no
// state yet).
func (p *Pass) writeCondition(c metav1.Condition, after time.Duration) Action {
	st := p.Machine.Status.DeepCopy()
	c.ObservedGeneration = p.Machine.Generation
	meta.SetStatusCondition(&st.Conditions, c)
	if st.State == "" {
		st.State = computev1alpha1.MachineStatePending
	}
	return Action{Kind: WriteStatus, Status: st, After: after}
}

// lookAgain is how long to wait before trying again what c says keeps the Machine from
// its runtime machine or its new spec: soon while a Secret it could not read may still be
// granted (SecretRetry), StuckAfter for everything else.
func (p *Pass) lookAgain(c metav1.Condition) time.Duration {
	if !p.SecretUnreadSince.IsZero() && c.Type == computev1alpha1.ConditionIgnitionReady {
		return SecretRetry(p.SecretUnreadSince, p.Now, p.StuckAfter)
	}
	return p.StuckAfter
}

// Problem records what keeps the Machine from its runtime machine or from its new spec,
// as the condition to show (Create, Reimage, CheckFirstBoot).
func (p *Pass) Problem(c metav1.Condition) { p.found = append(p.found, c) }

// Refused records the runtime's refusal of Create, with its message.
func (p *Pass) Refused(why string) { p.refused = why }

// Created records the machine Create made, and returns the Event to record now.
func (p *Pass) Created(rm *mriv1alpha1.Machine) []Event {
	p.Runtime = rm
	if p.Machine.Status.MachineID != "" {
		return nil // made again after it was lost: not news
	}
	return []Event{{Reason: computev1alpha1.EventCreated, Action: "Create",
		Message: fmt.Sprintf("runtime machine %s created on MachinePool %s", rm.GetMetadata().GetId(), p.Pool)}}
}

// RefusedReimage records the runtime's refusal of a reimage to t: the machine keeps its
// image, and its power and reboots are still carried out. It returns the Warning to record now.
func (p *Pass) RefusedReimage(t ReimageTarget, why string) []Event {
	c, e := refusedReimage(p.Pool, t, why)
	p.found = append(p.found, c)
	return []Event{e}
}

// Reimaging records the runtime's answer to a reimage to t, and returns the Event to
// record now (none when the runtime already had that ask).
func (p *Pass) Reimaging(t ReimageTarget, answer *mriv1alpha1.Machine) []Event {
	p.reimaging = &metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionTrue,
		Reason: computev1alpha1.ReasonReimaging, Message: fmt.Sprintf("booting %s in place on MachinePool %s (was %s)", t.To, p.Pool, t.From)}
	if answer.GetMetadata().GetGeneration() <= p.Runtime.GetMetadata().GetGeneration() {
		return nil
	}
	return []Event{{Reason: computev1alpha1.ReasonReimaging, Action: "Reimage",
		Message: fmt.Sprintf("reimaging from %s to %s on MachinePool %s", t.From, t.To, p.Pool)}}
}

// FirstBoot records the first-boot config the Machine's spec names now (CheckFirstBoot):
// whether the running machine booted it is shown, once it ever differed.
func (p *Pass) FirstBoot(boot *mriv1alpha1.FirstBootConfig) {
	c := firstBootUpToDate(boot, p.Runtime)
	if c.Status == metav1.ConditionTrue && meta.FindStatusCondition(p.Machine.Status.Conditions, c.Type) == nil {
		return // it never differed: nothing to say
	}
	p.found = append(p.found, c)
}

// Answered records the runtime's machine after SetPower or Reboot.
func (p *Pass) Answered(rm *mriv1alpha1.Machine) { p.Runtime = rm }

// Deleted records what the runtime holds under the Machine's name after DeleteRuntime.
func (p *Pass) Deleted(s Sorted) { p.Runtime, p.Garbage = s.Mine, s.Delete }
