package osimage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
	"github.com/anvil-dev/anvil/internal/rollout"
)

// reconcileRollout moves the Machines bound to a pool that boot o's output tag under the
// Reimage policy to the published index, a wave at a time (package rollout decides who),
// by annotating the ones asked; their poollets reimage them. It reports into o's status
// (Reconcile writes it) and returns the Events that report carries and when the first
// Machine under way passes its deadline, which nothing else would wake the controller for.
func (r *OSImageReconciler) reconcileRollout(ctx context.Context, o *imagesv1alpha1.OSImage) ([]statusEvent, time.Duration, error) {
	target := o.Status.Index
	if target == "" {
		return nil, 0, nil
	}
	tag := index.OutputTag(o)
	list := &computev1alpha1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.Namespace), client.MatchingFields{index.MachineImageTag: tag}); err != nil {
		return nil, 0, err
	}
	byName := map[string]*computev1alpha1.Machine{}
	var machines []rollout.Machine
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.MachinePoolRef == nil || !m.DeletionTimestamp.IsZero() || m.Spec.ImageUpdatePolicy == computev1alpha1.ImageUpdatePolicyNever {
			continue // unbound: it boots what the tag names when it is created
		}
		current := false
		if m.Status.Image != nil {
			c := r.Entries.imageUpToDate(ctx, m, o)
			if c != nil && c.Status == metav1.ConditionUnknown {
				return nil, 0, fmt.Errorf("Machine %s: %s", m.Name, c.Message) // asking it could reimage a current Machine
			}
			current = c != nil && c.Status == metav1.ConditionTrue
		}
		machines = append(machines, rollout.Observe(m, current))
		byName[m.Name] = m
	}
	maxUnavailable, paused, deadline := rolloutSettings(o)
	now := r.now()
	plan, err := rollout.Decide(rollout.Input{Target: target, Machines: machines, MaxUnavailable: maxUnavailable, Paused: paused, Deadline: deadline, Now: now})
	if err != nil {
		return nil, 0, err // the API's validation refuses what Decide refuses
	}
	// A cache that has not seen the last wave's annotations yet makes Decide pick the same
	// Machines again (it takes each pool's in name order): a stale read re-asks, it does
	// not ask more.
	for _, name := range plan.Ask {
		m := byName[name]
		patch := client.MergeFrom(m.DeepCopy())
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, imagesv1alpha1.AnnotationRolloutTarget, rollout.TargetAnnotation(tag, target))
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, imagesv1alpha1.AnnotationRolloutAskedAt, now.UTC().Format(time.RFC3339))
		if err := r.Client.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
			return nil, 0, err
		}
	}

	before := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionRollingOut)
	if before != nil {
		before = before.DeepCopy()
	}
	retargeted := o.Status.Rollout == nil || o.Status.Rollout.Target != target
	o.Status.Rollout = &imagesv1alpha1.RolloutStatus{Target: target, Machines: int32(plan.Machines),
		Updated: int32(plan.Updated), Updating: int32(plan.Updating), Pending: int32(plan.Pending)}
	status, reason, msg := plan.Condition(target, paused)
	setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionRollingOut, status, reason, msg)

	var events []statusEvent
	switch {
	case reason == imagesv1alpha1.ReasonRolloutStalled && (before == nil || before.Message != msg):
		events = append(events, statusEvent{corev1.EventTypeWarning, imagesv1alpha1.EventRolloutStalled, "Rollout", msg, nil})
	case reason == imagesv1alpha1.ReasonRolloutComplete && plan.Machines > 0 && (before == nil || before.Reason != reason || retargeted):
		events = append(events, statusEvent{corev1.EventTypeNormal, imagesv1alpha1.EventRolloutComplete, "Rollout", msg, nil})
	case reason != imagesv1alpha1.ReasonRolloutComplete && retargeted:
		events = append(events, statusEvent{corev1.EventTypeNormal, imagesv1alpha1.EventRolloutStarted, "Rollout",
			fmt.Sprintf("moving %d Machines to index %s, at most %s of each pool's unavailable at once", plan.Machines-plan.Updated, target, maxUnavailable.String()), nil})
	}
	var recheck time.Duration
	if !plan.RecheckAt.IsZero() {
		recheck = plan.RecheckAt.Sub(now) + time.Second
	}
	return events, recheck, nil
}

// rolloutSettings is spec.rollout with its defaults (those the API sets, for an OSImage
// stored before it had them).
func rolloutSettings(o *imagesv1alpha1.OSImage) (maxUnavailable intstr.IntOrString, paused bool, deadline time.Duration) {
	maxUnavailable, deadline = intstr.FromInt32(1), 600*time.Second
	if s := o.Spec.Rollout; s != nil {
		if s.MaxUnavailable != nil {
			maxUnavailable = *s.MaxUnavailable
		}
		if s.ProgressDeadlineSeconds != nil {
			deadline = time.Duration(*s.ProgressDeadlineSeconds) * time.Second
		}
		paused = s.Paused
	}
	return maxUnavailable, paused, deadline
}

func (r *OSImageReconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
