package poollet

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/rollout"
)

// wantsReimage reports whether the Machine names another image than its runtime machine
// runs, or its OSImage's rollout asks it to boot another index of the tag it names (the
// annotation rollout.Target reads), and its policy lets the machine be reimaged for it.
func wantsReimage(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) bool {
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

// reimage asks the runtime to boot the Machine's image in place, with its first-boot
// config as it is now, and says so (Reimaging, an Event); the runtime's events bring the
// Machine back, and report writes Reimaged once the runtime runs the new image. What the
// user must fix (an image that does not resolve or that the runtime refuses, a missing
// Secret) comes back as the condition to show: the machine keeps its image, and its power
// and reboots are still carried out.
//
// A rollout's reimage (spec.image unchanged, another index of its tag asked) boots the
// index the OSImage controller names, not what the tag names by the time the poollet
// reads it: the rollout paces Machines to one index. Every name below then carries the
// digest, since the reference alone is the same before and after.
func (r *MachineReconciler) reimage(ctx context.Context, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) (ctrl.Result, *metav1.Condition, error) {
	img := rm.GetSpec().GetImage()
	from, to, digest := img.GetReference(), m.Spec.Image, ""
	if cond := r.imageNotOwned(m); cond != nil {
		return ctrl.Result{}, cond, nil // a rollout's target is in the same repository
	}
	if img.GetReference() == m.Spec.Image {
		digest = rollout.Target(m)
		from, to = from+"@"+img.GetDigest(), to+"@"+digest
	} else {
		var cond *metav1.Condition
		if digest, cond = r.resolveImage(ctx, m, mri.ArchFromMRI(rm.GetSpec().GetArchitecture())); cond != nil {
			return ctrl.Result{}, cond, nil
		}
	}
	boot, cond, err := r.firstBoot(ctx, m)
	if cond != nil || err != nil {
		return ctrl.Result{}, cond, err
	}
	resp, err := r.Runtime.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: rm.GetMetadata().GetId(),
		Image: &mriv1alpha1.Image{Reference: m.Spec.Image, Digest: digest}, FirstBoot: boot})
	if reimageRefused(err) {
		msg := fmt.Sprintf("MachinePool %s refused image %s: %s; the machine keeps running %s", r.Pool, to, mri.MessageOf(err), from)
		r.Events.Warning(m, computev1alpha1.ReasonReimageRefused, "Reimage", "%s", msg)
		return ctrl.Result{}, &metav1.Condition{Type: computev1alpha1.ConditionReimaging,
			Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonReimageRefused, Message: msg}, nil
	}
	if err != nil {
		return ctrl.Result{}, nil, fmt.Errorf("reimaging: %w", err)
	}
	if resp.GetMachine().GetMetadata().GetGeneration() > rm.GetMetadata().GetGeneration() {
		r.Events.Normal(m, computev1alpha1.ReasonReimaging, "Reimage", "reimaging from %s to %s on MachinePool %s", from, to, r.Pool)
	}
	res, err := retryStale(ctrl.Result{RequeueAfter: r.StuckAfter}, r.condition(ctx, m, metav1.Condition{Type: computev1alpha1.ConditionReimaging,
		Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonReimaging,
		Message: fmt.Sprintf("booting %s in place on MachinePool %s (was %s)", to, r.Pool, from)}))
	return res, nil, err
}

// reimageRefused: the runtime will not run the new image as asked (it does not exist, has
// no entry for the machine's architecture, or is not one the runtime boots); asking again
// cannot help until the Machine changes.
func reimageRefused(err error) bool {
	switch mri.ReasonOf(err) {
	case mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE,
		mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND:
		return true
	}
	return false
}

// reimageEnded sets Reimaging False (Reimaged) in st once the runtime machine runs the
// image the Machine names (and the index its rollout asks for), with FirstBootUpToDate
// Current (a reimage boots the first-boot config as it was then), and reports whether it did.
func reimageEnded(st *computev1alpha1.MachineStatus, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) bool {
	img := rm.GetSpec().GetImage()
	if img.GetReference() != m.Spec.Image || wantsReimage(m, rm) {
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
func firstBootUpToDate(want *mriv1alpha1.FirstBootConfig, rm *mriv1alpha1.Machine) *metav1.Condition {
	have := rm.GetSpec().GetFirstBoot()
	same := want.GetFormat() == have.GetFormat() && string(want.GetData()) == string(have.GetData()) &&
		maps.Equal(want.GetMetaData(), have.GetMetaData()) &&
		slices.EqualFunc(want.GetHardwareMetaData(), have.GetHardwareMetaData(), func(a, b *mriv1alpha1.HardwareMetaData) bool { return proto.Equal(a, b) })
	if !same {
		return &metav1.Condition{Type: computev1alpha1.ConditionFirstBootUpToDate, Status: metav1.ConditionFalse,
			Reason:  computev1alpha1.ReasonAppliedAtNextReimage,
			Message: "the first-boot configuration (its Secret, spec.metaData or spec.hardwareMetaData) changed after the machine booted; a running machine has read its own already: the next reimage (a change of spec.image) boots with the new one"}
	}
	c := firstBootCurrent(0)
	return &c
}

func firstBootCurrent(generation int64) metav1.Condition {
	return metav1.Condition{Type: computev1alpha1.ConditionFirstBootUpToDate, Status: metav1.ConditionTrue,
		Reason: computev1alpha1.ReasonFirstBootCurrent, Message: "the machine booted the first-boot configuration its spec names", ObservedGeneration: generation}
}
