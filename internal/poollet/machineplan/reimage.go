package machineplan

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/rollout"
)

// WantsReimage reports whether the Machine names another image than its runtime machine
// runs, or its OSImage's rollout asks it to boot another index of the tag it names (the
// annotation rollout.Target reads), and its policy lets the machine be reimaged for it.
func WantsReimage(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) bool {
	if m.Spec.ImageUpdatePolicy == computev1alpha1.ImageUpdatePolicyNever {
		return false
	}
	img := rm.GetSpec().GetImage()
	if img.GetReference() != m.Spec.Image {
		return true
	}
	target := rollout.Target(m)
	return target != "" && img.GetDigest() != target
}

// ReimageTarget is the image a reimage boots, and how Events and conditions name both.
type ReimageTarget struct {
	// From and To name the image running and the one asked for.
	From, To string
	// Digest is the index to boot; with Resolve it is the digest the Machine's reference
	// resolves to, which the poollet looks up.
	Digest  string
	Resolve bool
}

// TargetOf is what a reimage of rm for m boots. A rollout's reimage (spec.image
// unchanged, another index of its tag asked) boots the index the OSImage controller names,
// not what the tag names by the time the poollet reads it: the rollout paces Machines to
// one index. Both names then carry the digest, since the reference alone is the same
// before and after.
func TargetOf(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) ReimageTarget {
	img := rm.GetSpec().GetImage()
	t := ReimageTarget{From: img.GetReference(), To: m.Spec.Image}
	if img.GetReference() != m.Spec.Image {
		t.Resolve = true
		return t
	}
	t.Digest = rollout.Target(m)
	t.From, t.To = t.From+"@"+img.GetDigest(), t.To+"@"+t.Digest
	return t
}

// ReimageRefused reports whether err says the runtime will not run the new image as asked
// (it does not exist, has no entry for the machine's architecture, or is not one the
// runtime boots): asking again cannot help until the Machine changes.
func ReimageRefused(err error) bool {
	switch mri.ReasonOf(err) {
	case mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE,
		mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND:
		return true
	}
	return false
}

// refusedReimage is the condition and the Warning for a reimage the runtime refused.
func refusedReimage(pool string, t ReimageTarget, why string) (metav1.Condition, Event) {
	msg := fmt.Sprintf("MachinePool %s refused image %s: %s; the machine keeps running %s", pool, t.To, why, t.From)
	return metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonReimageRefused, Message: msg},
		Event{Warning: true, Reason: computev1alpha1.ReasonReimageRefused, Action: "Reimage", Message: msg}
}

// reimageEnded sets Reimaging False (Reimaged) in st once the runtime machine runs the
// image the Machine names (and the index its rollout asks for), with FirstBootUpToDate
// Current (a reimage boots the first-boot config as it was then), and reports whether it did.
func reimageEnded(st *computev1alpha1.MachineStatus, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) bool {
	img := rm.GetSpec().GetImage()
	if img.GetReference() != m.Spec.Image || WantsReimage(m, rm) {
		return false
	}
	// Under way by the condition, or by what was last reported booted: the condition's
	// write may have been lost to a conflict while a fast runtime finished.
	c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionReimaging)
	was := m.Status.Image
	if (c == nil || c.Status != metav1.ConditionTrue) && (was == nil || was.Reference == img.GetReference() && was.Digest == img.GetDigest()) {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionFalse,
		Reason: computev1alpha1.ReasonReimaged, Message: "running " + m.Spec.Image, ObservedGeneration: m.Generation})
	if meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionFirstBootUpToDate) != nil {
		meta.SetStatusCondition(&st.Conditions, firstBootCurrent(m.Generation))
	}
	return true
}

// firstBootUpToDate compares the Machine's first-boot config with the one its runtime
// machine booted: False (AppliedAtNextReimage) when they differ, else True (Current).
func firstBootUpToDate(want *mriv1alpha1.FirstBootConfig, rm *mriv1alpha1.Machine) metav1.Condition {
	have := rm.GetSpec().GetFirstBoot()
	same := want.GetFormat() == have.GetFormat() && string(want.GetData()) == string(have.GetData()) &&
		maps.Equal(want.GetMetaData(), have.GetMetaData()) &&
		slices.EqualFunc(want.GetHardwareMetaData(), have.GetHardwareMetaData(), func(a, b *mriv1alpha1.HardwareMetaData) bool { return proto.Equal(a, b) })
	if !same {
		return metav1.Condition{Type: computev1alpha1.ConditionFirstBootUpToDate, Status: metav1.ConditionFalse,
			Reason:  computev1alpha1.ReasonAppliedAtNextReimage,
			Message: "the first-boot configuration (its Secret, spec.metaData or spec.hardwareMetaData) changed after the machine booted; a running machine has read its own already: the next reimage (a change of spec.image) boots with the new one"}
	}
	return firstBootCurrent(0)
}

func firstBootCurrent(generation int64) metav1.Condition {
	return metav1.Condition{Type: computev1alpha1.ConditionFirstBootUpToDate, Status: metav1.ConditionTrue,
		Reason: computev1alpha1.ReasonFirstBootCurrent, Message: "the machine booted the first-boot configuration its spec names", ObservedGeneration: generation}
}
