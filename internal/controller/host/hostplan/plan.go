// Package hostplan decides, from a Host and what the provisioner says of its server, the
// one thing the Host controller does next and the status it reports (Decide), and what
// that action's outcome means: a failure's Reason, a wait, or a next step at once
// (Conclude). It calls nothing: the controller gathers the inputs, carries out the Action
// and writes the status.
//
// The decision is level-based. Registration is checked in every state, so a provisioner
// that lost its records gets the Host back: re-enrolled, and — when the Host's deployment
// record (record.go, metadata that survives a lost status) says a deployment was started
// for its consumer — adopted, never written again.
//
// The server's power is switched one recorded attempt at a time (power.go): a failed
// attempt is reported (Ready PowerChangeFailed, lastError) and retried after a back-off
// that grows with the failures in a row and is computed from the Host's status alone, so
// it holds across restarts; a success resets it.
package hostplan

import (
	"fmt"
	"time"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Action is the one provisioner call a reconcile makes. The zero value is invalid.
type Action int

const (
	ActionInvalid Action = iota
	// ActionWait: nothing to call; the server is busy or the Host is where it should be.
	ActionWait
	ActionRegister
	ActionInspect
	// ActionReadHardware reads what inspection found and writes HardwareData.
	ActionReadHardware
	ActionProvide
	// ActionProvision verifies the image, builds the config drive and provisions.
	ActionProvision
	ActionDeprovision
	ActionPowerOn
	ActionPowerOff
	ActionAdopt
	// ActionReboot resets a provisioned, powered-on server for a new reboot token.
	ActionReboot
	ActionDetach
	ActionDelete
	// ActionRemoveFinalizer: the provisioner has forgotten the Host; let it go.
	ActionRemoveFinalizer
	// ActionWipe deploys the site's eraser (Input.Eraser) on a released server.
	ActionWipe
	// ActionRebuild writes spec.image and the config drive again to a provisioned server
	// in place, for the consumer that holds it (rebuild.go): nothing is wiped.
	ActionRebuild
)

var actionNames = [...]string{"Invalid", "Wait", "Register", "Inspect", "ReadHardware", "Provide",
	"Provision", "Deprovision", "PowerOn", "PowerOff", "Adopt", "Reboot", "Detach", "Delete", "RemoveFinalizer", "Wipe", "Rebuild"}

func (a Action) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return actionNames[a]
}

// Input is everything the decision depends on.
type Input struct {
	Host *metalv1alpha1.Host
	// Node is the provisioner's view of the server; nil when it does not know the Host.
	Node *provisioner.Node
	// HardwareKnown: a HardwareData for the Host exists, so inspection need not run again.
	HardwareKnown bool
	// Reregister: the BMC details or credentials changed since the last registration.
	Reregister bool
	// InspectionStarted: the provisioner accepted an inspection whose result has not been
	// read yet (the Host's Inspected condition says Inspecting).
	InspectionStarted bool
	// RebootRequested: the Host carries a reboot token not carried out yet
	// (RebootRequested(Host)).
	RebootRequested bool
	// CredentialsProblem says what is wrong with the BMC credentials Secret, when
	// something is: the Host cannot be registered until it is fixed.
	CredentialsProblem string
	// Unreachable: the provisioner could not be asked about the Host, so Node says
	// nothing. The Host keeps its state.
	Unreachable bool
	// Eraser is the image the site erases this Host's disks with (for its architecture),
	// nil when the site does not wipe it (fake hardware; Ironic's own cleaning; none).
	Eraser *provisioner.Image
	// WipeTimeout is how long the eraser may run before the wipe counts as failed (0: no
	// limit); Now is the time of the decision.
	WipeTimeout time.Duration
	Now         time.Time
	// MaxBackoff caps the waits of a failing Host (0: DefaultMaxBackoff).
	MaxBackoff time.Duration

	// record is the Host's deployment record, read by Decide.
	record *Record
}

// Plan is the decision: one action and the status to report while it runs.
type Plan struct {
	Action Action
	// State and Operational are the Host's status after this reconcile.
	State       metalv1alpha1.ProvisioningState
	Operational metalv1alpha1.OperationalStatus
	// Reason and Message explain the Ready condition. Message is the provisioner's error
	// when Operational is Error.
	Reason, Message string
	// Busy: the server is in the middle of something only the provisioner can report the
	// end of; the controller looks again soon.
	Busy bool
	// Failed: the Host is in error; the controller backs off before trying again.
	Failed bool
	// WipeReason, when set, is the Wiped condition's new Reason (True only for
	// ReasonWiped), and WipeMessage its message.
	WipeReason, WipeMessage string
	// WipeStarted: the eraser runs; its clock starts now unless it has already.
	WipeStarted bool
	// Record, when set, is the Host's new deployment record, written before the action is
	// carried out — for Provision and Rebuild, once the provisioner is about to start the
	// deployment (not while it waits for a slot); for Reboot, after the reset, which is not
	// idempotent: the record never claims a reset that failed. ClearRecord removes it
	// before the action. When the write fails, the action is not carried out.
	Record      *Record
	ClearRecord bool
	// Adopt is the image ActionAdopt adopts the server with (the record's).
	Adopt *metalv1alpha1.HostImage
	// PowerChange is the Host's status.powerChange after this reconcile (power.go): the
	// attempts to switch the server's power, nil once it is as spec.online says.
	PowerChange *metalv1alpha1.PowerChange
	// RetryAfter, when set, is when to look at the Host again: an attempt waiting for its
	// back-off. It comes before Busy and Failed's own timing.
	RetryAfter time.Duration
	// Releases: the Host is being deleted and, once this action is carried out, the
	// provisioner holds nothing of it (forgotten, detached or deleted).
	Releases bool
	// Finalize (Conclude sets it): the action released the Host; its finalizer goes.
	Finalize bool

	// powerDecided: PowerChange was decided; otherwise the Host's record is kept as it is.
	powerDecided bool
	// now and backoffCap are the decision's Input.Now and cap, for Conclude.
	now        time.Time
	backoffCap time.Duration
}

// maxBackoff is the cap of the Host's waits.
func (in Input) maxBackoff() time.Duration {
	if in.MaxBackoff > 0 {
		return in.MaxBackoff
	}
	return DefaultMaxBackoff
}

// Decide returns the next step for in.Host.
func Decide(in Input) Plan {
	h := in.Host
	in.record = recordOf(h)
	st := h.Status.ProvisioningState
	if st == "" {
		st = metalv1alpha1.StateRegistering
	}
	if in.Unreachable {
		op := h.Status.OperationalStatus
		if op == "" {
			op = metalv1alpha1.OperationalOK
		}
		return in.stamp(Plan{Action: ActionWait, State: st, Operational: op, Reason: metalv1alpha1.ReasonProvisionerUnavailable})
	}
	p := decide(in, st)
	if p.Action == ActionRegister && in.CredentialsProblem != "" {
		p = Plan{Action: ActionWait, State: st, Operational: metalv1alpha1.OperationalError,
			Reason: metalv1alpha1.ReasonCredentialsMissing, Message: in.CredentialsProblem, Failed: true}
	}
	if wipes(in) && (tenantImage(in) || p.WipeReason == "" && leftBehind(in) && !notWipedByStatus(h)) {
		p = markTenantData(p)
	}
	return in.stamp(p)
}

// stamp completes p with what every plan carries: the power record, kept as it is where
// the decision did not touch the power, and what Conclude needs of the input.
func (in Input) stamp(p Plan) Plan {
	if !p.powerDecided {
		p.PowerChange = in.Host.Status.PowerChange
	}
	p.now, p.backoffCap = in.Now, in.maxBackoff()
	return p
}

func decide(in Input, st metalv1alpha1.ProvisioningState) Plan {
	h := in.Host
	if h.DeletionTimestamp != nil {
		return deleting(in, st)
	}
	if h.Spec.Detached {
		if in.Node != nil {
			return Plan{Action: ActionDetach, State: st, Operational: metalv1alpha1.OperationalDetached, Reason: metalv1alpha1.ReasonDetached}
		}
		return Plan{Action: ActionWait, State: st, Operational: metalv1alpha1.OperationalDetached, Reason: metalv1alpha1.ReasonDetached,
			Message: "the provisioner has forgotten this Host; the server runs as it was"}
	}
	n := in.Node
	if n == nil || in.Reregister {
		return Plan{Action: ActionRegister, State: registeringState(in, st), Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonRegistering, Busy: true}
	}
	switch n.State {
	case provisioner.StateEnrolling:
		return busy(registeringState(in, st), metalv1alpha1.ReasonRegistering)
	case provisioner.StateManageable:
		return manageable(in)
	case provisioner.StateInspecting:
		return busy(metalv1alpha1.StateInspecting, metalv1alpha1.ReasonInspecting)
	case provisioner.StateCleaning:
		if in.record != nil || st == metalv1alpha1.StateDeprovisioning || (wipes(in) && notWiped(in)) {
			return busy(metalv1alpha1.StateDeprovisioning, metalv1alpha1.ReasonDeprovisioning)
		}
		return busy(metalv1alpha1.StateInspecting, metalv1alpha1.ReasonInspecting)
	case provisioner.StateAvailable:
		return available(in)
	case provisioner.StateDeploying:
		if isEraser(in, n.Image) {
			return eraserRuns(in)
		}
		return busy(metalv1alpha1.StateProvisioning, metalv1alpha1.ReasonProvisioning)
	case provisioner.StateAdopting:
		return busy(metalv1alpha1.StateProvisioned, metalv1alpha1.ReasonAdopted)
	case provisioner.StateActive:
		return active(in)
	case provisioner.StateDeleting:
		return busy(metalv1alpha1.StateDeprovisioning, metalv1alpha1.ReasonDeprovisioning)
	case provisioner.StateFailed:
		if n.FailedFrom == provisioner.OpProvision && isEraser(in, n.Image) {
			return eraserFailed(in)
		}
		return failed(in, st)
	}
	return Plan{Action: ActionWait, State: st, Operational: metalv1alpha1.OperationalError, Failed: true,
		Reason: metalv1alpha1.ReasonRegistrationFailed, Message: fmt.Sprintf("the provisioner reports an unknown state %q", n.State)}
}

// registeringState keeps a provisioned Host's state while it is enrolled again: to its
// tenant the server never stopped being Provisioned.
func registeringState(in Input, st metalv1alpha1.ProvisioningState) metalv1alpha1.ProvisioningState {
	if adoptable(in) != nil {
		return metalv1alpha1.StateProvisioned
	}
	if st == metalv1alpha1.StateDeleting {
		return st
	}
	return metalv1alpha1.StateRegistering
}

func busy(st metalv1alpha1.ProvisioningState, reason string) Plan {
	return Plan{Action: ActionWait, State: st, Operational: metalv1alpha1.OperationalOK, Reason: reason, Busy: true}
}

// manageable decides for a node the provisioner knows but that was never deployed, or
// whose records it lost. The deployment record alone says which: a deployment started for
// the Host's consumer, who still wants a server, is adopted as it runs; anything else
// (never deployed, released, another consumer's) goes the way of a new server —
// inspected if need be, provided, and, at Available, wiped first where the record says
// the disks may hold what a consumer left.
func manageable(in Input) Plan {
	switch img := adoptable(in); {
	case img != nil:
		return Plan{Action: ActionAdopt, State: metalv1alpha1.StateProvisioned, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonAdopted, Busy: true, Adopt: img}
	case !in.HardwareKnown && in.InspectionStarted:
		// Inspection was started and the server is back to Manageable: it has finished.
		return Plan{Action: ActionReadHardware, State: metalv1alpha1.StateInspecting, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonInspected, Busy: true}
	case !in.HardwareKnown:
		return Plan{Action: ActionInspect, State: metalv1alpha1.StateInspecting, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonInspecting, Busy: true}
	}
	if in.record != nil {
		return Plan{Action: ActionProvide, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonDeprovisioning, Busy: true}
	}
	return Plan{Action: ActionProvide, State: metalv1alpha1.StateInspecting, Operational: metalv1alpha1.OperationalOK,
		Reason: metalv1alpha1.ReasonInspected, Busy: true}
}

func available(in Input) Plan {
	h := in.Host
	if wipes(in) && notWiped(in) {
		// Before anything else, whoever asks: a Host not wiped is never provisioned.
		return startWipe(in)
	}
	if h.Spec.Image != nil {
		p := Plan{Action: ActionProvision, State: metalv1alpha1.StateProvisioning, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonProvisioning, Busy: true, Record: deploymentRecord(in)}
		if wipes(in) {
			// Marked before the call: from here on the disks may hold the tenant's data.
			p = markTenantData(p)
		}
		return p
	}
	// Deprovisioned (and wiped where the site wipes): the record has served.
	return power(in, Plan{Action: ActionWait, State: metalv1alpha1.StateAvailable, Operational: metalv1alpha1.OperationalOK,
		Reason: metalv1alpha1.ReasonReady, ClearRecord: in.record != nil})
}

func active(in Input) Plan {
	h, n := in.Host, in.Node
	if isEraser(in, n.Image) {
		return eraserRuns(in)
	}
	same := h.Spec.Image != nil && SameImage(h.Spec.Image, n.Image)
	theirs := in.record != nil && !in.record.ours(h)
	if h.Spec.Image != nil && !theirs && (!same && keepsServer(h) || rebuildPending(h)) {
		return rebuild(in, metalv1alpha1.OperationalOK, metalv1alpha1.ReasonProvisioning, "")
	}
	if !same || theirs {
		// Cleared, or a different image wanted without its consumer asking to keep the
		// server, or a deployment that is not the consumer's (released, or another's: an
		// edited consumerRef): the disk is wiped first; Available then provisions anew.
		return Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonDeprovisioning, Busy: true, Record: releasedRecord(in)}
	}
	p := Plan{Action: ActionWait, State: metalv1alpha1.StateProvisioned, Operational: metalv1alpha1.OperationalOK,
		Reason: metalv1alpha1.ReasonProvisioned, Record: backfill(in)}
	if powerAsAsked(h, n) && in.RebootRequested && h.Spec.Online {
		p.Action, p.Record = ActionReboot, rebooted(in)
	}
	// Power comes before a reboot. An unknown power state (a provisioner that has not asked
	// the BMC yet) is set to what the spec says: setting power is idempotent, and afterwards
	// the state is known.
	return power(in, p)
}

// failed chooses the way out of a failed operation. Every way is a retry of something
// idempotent, after the controller's back-off, so nothing stays stuck: a fixed spec, BMC or
// image makes the next attempt succeed.
func failed(in Input, st metalv1alpha1.ProvisioningState) Plan {
	h, n := in.Host, in.Node
	p := Plan{Operational: metalv1alpha1.OperationalError, Message: n.LastError, Failed: true}
	switch n.FailedFrom {
	case provisioner.OpInspect:
		p.Action, p.State, p.Reason = ActionInspect, metalv1alpha1.StateInspecting, metalv1alpha1.ReasonInspectionFailed
	case provisioner.OpProvision:
		if h.Spec.Image != nil && in.record.ours(h) && keepsServer(h) {
			// A rebuild failed: its consumer keeps the server, so it is rebuilt again.
			return rebuild(in, metalv1alpha1.OperationalError, metalv1alpha1.ReasonProvisioningFailed, n.LastError)
		}
		// Deprovision takes a failed deploy back to Available, where a still-wanted image
		// is provisioned again; the failed deployment is never adopted.
		p.Action, p.State, p.Reason = ActionDeprovision, metalv1alpha1.StateProvisioning, metalv1alpha1.ReasonProvisioningFailed
		p.Record = releasedRecord(in)
	case provisioner.OpAdopt:
		if img := adoptable(in); img != nil {
			p.Action, p.State, p.Reason, p.Adopt = ActionAdopt, metalv1alpha1.StateProvisioned, metalv1alpha1.ReasonProvisioningFailed, img
			break
		}
		// Released meanwhile: back through Available.
		p.Action, p.State, p.Reason = ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.ReasonProvisioningFailed
	case provisioner.OpClean, provisioner.OpDelete:
		p.Action, p.State, p.Reason = ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.ReasonDeprovisioningFailed
	default:
		p.Action, p.State, p.Reason = ActionRegister, registeringState(in, st), RegistrationReason(n.LastError)
	}
	return p
}

func deleting(in Input, st metalv1alpha1.ProvisioningState) Plan {
	h, n := in.Host, in.Node
	p := Plan{State: metalv1alpha1.StateDeleting, Operational: metalv1alpha1.OperationalOK, Reason: metalv1alpha1.ReasonDeleting}
	switch {
	case n == nil:
		p.Action, p.Releases = ActionRemoveFinalizer, true
	case h.Spec.Detached:
		p.Action, p.State, p.Releases = ActionDetach, st, true
	case n.Busy:
		p.Action, p.Busy = ActionWait, true
	case n.State == provisioner.StateActive, n.State == provisioner.StateDeploying,
		n.State == provisioner.StateFailed && (n.FailedFrom == provisioner.OpProvision || n.FailedFrom == provisioner.OpClean || n.FailedFrom == provisioner.OpDelete):
		p.Action, p.State, p.Busy = ActionDeprovision, metalv1alpha1.StateDeprovisioning, true
	case n.State == provisioner.StateDeleting, n.State == provisioner.StateCleaning, n.State == provisioner.StateInspecting:
		p.Action, p.Busy = ActionWait, true
	default:
		p.Action, p.Busy, p.Releases = ActionDelete, true, true
	}
	return p
}

// SameImage reports whether the provisioner's image is the one the Host asks for
// (HostImage.Same: checksums decide, not URLs).
func SameImage(want *metalv1alpha1.HostImage, have provisioner.Image) bool {
	return want.Same(HostImageOf(have))
}

// HostImageOf is the provisioner's image as a Host's.
func HostImageOf(img provisioner.Image) *metalv1alpha1.HostImage {
	file := func(f *provisioner.File) *metalv1alpha1.BootFile {
		if f == nil {
			return nil
		}
		return &metalv1alpha1.BootFile{URL: f.URL, Checksum: f.Checksum}
	}
	return &metalv1alpha1.HostImage{URL: img.URL, Checksum: img.Checksum, Format: metalv1alpha1.ImageFormat(img.Format),
		Kernel: file(img.Kernel), Initramfs: file(img.Initramfs), KernelArguments: img.KernelArguments}
}

// ImageOf is a Host's image as the provisioner's.
func ImageOf(img *metalv1alpha1.HostImage) provisioner.Image {
	switch {
	case img == nil:
		return provisioner.Image{}
	case img.Ramdisk():
		return provisioner.Image{Kernel: fileOf(img.Kernel), Initramfs: fileOf(img.Initramfs), KernelArguments: img.KernelArguments}
	}
	return provisioner.Image{URL: img.URL, Checksum: img.Checksum, Format: string(img.Format.OrRaw())}
}

func fileOf(f *metalv1alpha1.BootFile) *provisioner.File {
	if f == nil {
		return nil
	}
	return &provisioner.File{URL: f.URL, Checksum: f.Checksum}
}
