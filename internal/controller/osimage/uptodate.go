package osimage

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// ImageUpToDateReconciler keeps each Machine's ImageUpToDate condition: it is the condition's
// only writer. The poollet records what a machine booted (status.image); this compares
// that with the Machine's spec and with what the OSImage naming its tag publishes.
type ImageUpToDateReconciler struct {
	Client  client.Client
	Events  *events.Recorder
	Entries *BootedEntries
}

func (r *ImageUpToDateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &computev1alpha1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if m.Status.Image == nil || !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	o, err := r.osImageOf(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.write(ctx, m, r.Entries.imageUpToDate(ctx, m, o))
	if apierrors.IsConflict(err) {
		return requeue.AfterConflict(), nil // decided again from the Machine that won
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// BootedEntries caches the architecture entries of booted indexes by pinned reference (a
// digest names the same index forever), for both readers of a Machine's currency: the
// ImageUpToDate condition and the OSImage's rollout. Nil reads every time.
type BootedEntries struct{ m sync.Map }

// imageUpToDate decides the ImageUpToDate condition of m, which has booted (status.image
// set), against o, the OSImage publishing the tag its spec names (nil: none does).
func (e *BootedEntries) imageUpToDate(ctx context.Context, m *computev1alpha1.Machine, o *imagesv1alpha1.OSImage) *metav1.Condition {
	in := imagebuild.Currency{SpecImage: m.Spec.Image, Never: m.Spec.ImageUpdatePolicy == computev1alpha1.ImageUpdatePolicyNever,
		Booted: *m.Status.Image, Architecture: m.Status.Architecture}
	if o != nil {
		in.Output, in.OSImage = true, o.Name
		for _, p := range o.Status.Published {
			if p.Architecture == m.Status.Architecture {
				in.Published = p.Digest
			}
		}
		if in.Published != "" && m.Status.Image.Digest == o.Status.Index {
			in.BootedEntry = in.Published // the common case: no registry read
		} else if in.Published != "" {
			in.BootedEntry, in.EntryError = e.bootedEntry(ctx, m)
		}
	}
	return imagebuild.ImageUpToDate(in)
}

// osImageOf is the OSImage whose output tag the Machine's spec.image names, or nil.
func (r *ImageUpToDateReconciler) osImageOf(ctx context.Context, m *computev1alpha1.Machine) (*imagesv1alpha1.OSImage, error) {
	tag := imagebuild.TagName(m.Spec.Image)
	if tag == "" {
		return nil, nil
	}
	list := &imagesv1alpha1.OSImageList{}
	if err := r.Client.List(ctx, list, client.InNamespace(m.Namespace), client.MatchingFields{index.OSImageOutputTag: tag}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil // two OSImages publishing one tag fight anyway; either says what the tag holds
}

// bootedEntry is the entry for the machine's architecture of the index it booted.
func (e *BootedEntries) bootedEntry(ctx context.Context, m *computev1alpha1.Machine) (string, error) {
	tag, err := osimage.ParseReference(m.Status.Image.Reference)
	if err != nil {
		return "", err
	}
	ref := tag.Context().Digest(m.Status.Image.Digest).String()
	if e != nil {
		if cached, ok := e.m.Load(ref); ok {
			return cached.(map[computev1alpha1.Architecture]string)[m.Status.Architecture], nil
		}
	}
	_, entries, err := indexEntries(ctx, ref)
	if err != nil {
		return "", err
	}
	if e != nil {
		e.m.Store(ref, entries)
	}
	return entries[m.Status.Architecture], nil
}

// write sets, replaces or removes the condition, with an Event when it turns False.
func (r *ImageUpToDateReconciler) write(ctx context.Context, m *computev1alpha1.Machine, want *metav1.Condition) error {
	var old *metav1.Condition // a copy: setting the condition below changes the one in the list
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageUpToDate); c != nil {
		old = c.DeepCopy()
	}
	switch {
	case want == nil && old == nil:
		return nil
	case want != nil && old != nil && old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message:
		return nil
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want == nil {
		meta.RemoveStatusCondition(&m.Status.Conditions, computev1alpha1.ConditionImageUpToDate)
	} else {
		want.ObservedGeneration = m.Generation
		meta.SetStatusCondition(&m.Status.Conditions, *want)
	}
	if err := r.Client.Status().Patch(ctx, m, patch); err != nil {
		return err
	}
	if want != nil && want.Status != metav1.ConditionTrue && (old == nil || old.Reason != want.Reason || old.Message != want.Message) {
		r.Events.Warning(m, want.Reason, "CheckImage", "%s", want.Message)
	}
	return nil
}
