package machineplan

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

var stateFromMRI = map[mriv1alpha1.MachineState]computev1alpha1.MachineState{
	mriv1alpha1.MachineState_MACHINE_STATE_PENDING:     computev1alpha1.MachineStatePending,
	mriv1alpha1.MachineState_MACHINE_STATE_RUNNING:     computev1alpha1.MachineStateRunning,
	mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN:    computev1alpha1.MachineStateShutdown,
	mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING: computev1alpha1.MachineStateTerminating,
	mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED:  computev1alpha1.MachineStateTerminated,
}

var readyReason = map[computev1alpha1.MachineState]string{
	computev1alpha1.MachineStatePending:     computev1alpha1.ReasonPending,
	computev1alpha1.MachineStateRunning:     computev1alpha1.ReasonRunning,
	computev1alpha1.MachineStateShutdown:    computev1alpha1.ReasonShutdown,
	computev1alpha1.MachineStateTerminating: computev1alpha1.ReasonTerminating,
	computev1alpha1.MachineStateTerminated:  computev1alpha1.ReasonTerminated,
}

// Settled reports whether the runtime's status describes everything it was sent.
func Settled(rm *mriv1alpha1.Machine) bool {
	return rm.GetStatus().GetObservedGeneration() >= rm.GetMetadata().GetGeneration()
}

// ObservedStatus is the Machine status the runtime machine rm shows, for the pool. The
// poollet writes it only once rm is settled, and only when it differs from what is there.
// observedGeneration moves only when rm is what the Machine's spec asks for: a machine
// that could not be reimaged has not observed the new spec.
// servesConsoles says the pool's poollet serves consoles (it has a console endpoint).
func ObservedStatus(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine, pool string, servesConsoles bool) computev1alpha1.MachineStatus {
	st := *m.Status.DeepCopy()
	if specApplied(m, rm) {
		st.ObservedGeneration = m.Generation
	}
	st.State = stateFromMRI[rm.GetStatus().GetState()]
	if st.State == "" {
		st.State = computev1alpha1.MachineStatePending
	}
	st.MachineID = rm.GetMetadata().GetId()
	st.Pool = pool
	st.Architecture = mri.ArchFromMRI(rm.GetStatus().GetArchitecture())
	st.Image = nil
	if img := rm.GetSpec().GetImage(); img.GetReference() != "" {
		st.Image = &computev1alpha1.BootedImage{Reference: img.GetReference(), Digest: img.GetDigest()}
	}
	st.Addresses = nil
	for _, a := range rm.GetStatus().GetAddresses() {
		st.Addresses = append(st.Addresses, computev1alpha1.MachineAddress{Type: a.GetType(), Address: a.GetAddress()})
	}
	st.RebootToken = rm.GetStatus().GetRebootToken()
	st.Volumes = attachments(rm.GetStatus().GetVolumes())
	st.NetworkInterfaces = attachments(rm.GetStatus().GetNetworkInterfaces())

	ready := metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: readyReason[st.State], Message: "the machine is " + string(st.State), ObservedGeneration: m.Generation}
	if st.State == computev1alpha1.MachineStateRunning {
		ready.Status, ready.Message = metav1.ConditionTrue, "running on pool "+pool
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	// The runtime machine exists, so its image and first-boot config were resolved.
	for _, t := range []string{computev1alpha1.ConditionImageReady, computev1alpha1.ConditionIgnitionReady} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue,
			Reason: "Resolved", Message: "handed to the runtime", ObservedGeneration: m.Generation})
	}
	scheduled := computev1alpha1.ReasonBound
	if m.Annotations[computev1alpha1.AnnotationBoundBy] != "scheduler" {
		scheduled = computev1alpha1.ReasonPinned
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionScheduled,
		Status: metav1.ConditionTrue, Reason: scheduled, Message: "on MachinePool " + pool,
		ObservedGeneration: m.Generation})
	meta.SetStatusCondition(&st.Conditions, consoleCondition(rm, pool, servesConsoles, m.Generation))
	carryConditions(&st, rm, m.Generation)
	if c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionServerPowerFailing); c != nil && c.Status == metav1.ConditionTrue {
		// Whatever the state says, a machine whose power cannot be switched is not ready.
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, computev1alpha1.ReasonPowerChangeFailed, c.Message
		meta.SetStatusCondition(&st.Conditions, ready)
	}
	if c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionGuestStopped); c != nil && c.Status == metav1.ConditionTrue {
		// Running as a process, but its guest executes nothing.
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
		meta.SetStatusCondition(&st.Conditions, ready)
	}
	return st
}

// consoleCondition says whether the Machine's console can be used through the API: the
// pool must serve consoles, the runtime must have one for the machine (it says where in
// its status, CONTRACT.md S5; a bare-metal runtime has none yet), and typing needs the
// machine running.
func consoleCondition(rm *mriv1alpha1.Machine, pool string, servesConsoles bool, generation int64) metav1.Condition {
	c := metav1.Condition{Type: computev1alpha1.ConditionConsoleAvailable, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case !servesConsoles:
		c.Reason, c.Message = computev1alpha1.ReasonPoolServesNoConsoles, "pool "+pool+"'s poollet serves no consoles (it has no console endpoint)"
	case rm.GetStatus().GetConsole() == "":
		c.Reason, c.Message = computev1alpha1.ReasonRuntimeHasNoConsole, "pool "+pool+"'s runtime offers no serial console for this machine"
	case rm.GetStatus().GetState() != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING:
		c.Reason, c.Message = computev1alpha1.ReasonConsoleMachineNotRunning, "the console log can be read (machines/consolelog); typing at the console needs the machine running"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, computev1alpha1.ReasonConsoleAvailable, "machines/console and machines/consolelog"
	}
	return c
}

// carriedConditions are the runtime's conditions a Machine shows as the runtime reports
// them (CONTRACT.md S7). The others are the runtime's own detail, which Ready and the
// state already sum up.
var carriedConditions = []string{computev1alpha1.ConditionSiteReachable, computev1alpha1.ConditionServerPowerFailing, computev1alpha1.ConditionGuestStopped}

// carryConditions sets on st each carried condition rm reports, and removes those it no
// longer reports.
func carryConditions(st *computev1alpha1.MachineStatus, rm *mriv1alpha1.Machine, generation int64) {
	for _, t := range carriedConditions {
		var found *mriv1alpha1.Condition
		for _, c := range rm.GetStatus().GetConditions() {
			if c.GetType() == t {
				found = c
			}
		}
		if found == nil {
			meta.RemoveStatusCondition(&st.Conditions, t)
			continue
		}
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: found.GetReason(), Message: found.GetMessage(),
			ObservedGeneration: generation}
		if found.GetStatus() {
			c.Status = metav1.ConditionTrue
		}
		if c.Reason == "" {
			c.Reason = "RuntimeGaveNoReason" // the API requires one
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// specApplied reports whether the runtime machine carries what the Machine's spec asks of
// a running machine: its power, and its image unless its policy keeps the booted one.
func specApplied(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) bool {
	return rm.GetSpec().GetPower() == mri.PowerToMRI(m.Spec.Power) &&
		(m.Spec.ImageUpdatePolicy == computev1alpha1.ImageUpdatePolicyNever || rm.GetSpec().GetImage().GetReference() == m.Spec.Image)
}

func attachments(in []*mriv1alpha1.AttachmentStatus) []computev1alpha1.AttachmentStatus {
	var out []computev1alpha1.AttachmentStatus
	for _, a := range in {
		state := computev1alpha1.AttachStatePending
		if a.GetState() == mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED {
			state = computev1alpha1.AttachStateAttached
		}
		out = append(out, computev1alpha1.AttachmentStatus{Name: a.GetName(), State: state, Handle: a.GetHandle()})
	}
	return out
}

// stateEvent is the Event that records the Machine's move from one state to another, when
// it moved to one a person looks for.
func stateEvent(pool string, from, to computev1alpha1.MachineState, rm *mriv1alpha1.Machine) []Event {
	if from == to {
		return nil
	}
	switch to {
	case computev1alpha1.MachineStateRunning:
		return []Event{{Reason: computev1alpha1.EventStarted, Action: "Start", Message: "running on MachinePool " + pool}}
	case computev1alpha1.MachineStateShutdown:
		return []Event{{Reason: computev1alpha1.EventPoweredOff, Action: "PowerOff", Message: "powered off on MachinePool " + pool}}
	case computev1alpha1.MachineStateTerminated:
		return []Event{{Warning: true, Reason: computev1alpha1.EventFailed, Action: "Run",
			Message: fmt.Sprintf("MachinePool %s cannot run the machine: %s", pool, failureOf(rm))}}
	}
	return nil
}

// failureOf is what the runtime says keeps a terminated machine from running: its false
// conditions' reasons and messages.
func failureOf(rm *mriv1alpha1.Machine) string {
	var why []string
	for _, c := range rm.GetStatus().GetConditions() {
		if !c.GetStatus() {
			why = append(why, c.GetReason()+": "+c.GetMessage())
		}
	}
	if len(why) == 0 {
		return "the runtime gives no reason"
	}
	return strings.Join(why, "; ")
}
