package metal

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// projection is the tenant's copy of a Host's HardwareData: in the Machine's namespace,
// named after the Machine, owned by it when it exists, and carrying nothing that names the
// Host, its namespace or its BMC.
func projection(consumer metalv1alpha1.ConsumerReference, spec metalv1alpha1.HardwareDataSpec, owner *computev1alpha1.Machine) *metalv1alpha1.HardwareData {
	hd := &metalv1alpha1.HardwareData{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: consumer.Namespace, Name: consumer.Name,
			Annotations: map[string]string{AnnotationMachineUID: consumer.UID},
		},
		Spec: *spec.DeepCopy(),
	}
	if len(validation.IsValidLabelValue(consumer.Name)) == 0 {
		hd.Labels = map[string]string{metalv1alpha1.LabelMachine: consumer.Name}
	}
	if owner != nil {
		hd.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: computev1alpha1.GroupVersion.String(), Kind: "Machine",
			Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
		}}
	}
	return hd
}

// projected reports whether a HardwareData is a tenant's copy this runtime wrote (it
// carries the Machine's uid), as opposed to a Host's own inventory, which the runtime
// never replaces or deletes.
func projected(hd *metalv1alpha1.HardwareData) bool {
	return hd.Annotations[AnnotationMachineUID] != ""
}

// project writes the tenant's copy of a provisioned Host's hardware, once per version of
// the Host's HardwareData. A Machine in the Hosts' own namespace gets no copy: there the
// copy's name (the Machine's) is a Host's name too, and writing it would replace that
// Host's inventory with another's; whoever runs Machines there reads the Hosts' own.
func (r *Runtime) project(ctx context.Context, h *metalv1alpha1.Host, rec *record) error {
	if h.Spec.ConsumerRef.Namespace == h.Namespace {
		return nil
	}
	src := &metalv1alpha1.HardwareData{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKeyFromObject(h), src); err != nil {
		return client.IgnoreNotFound(err) // not inspected yet: its event brings the Host back
	}
	r.mu.Lock()
	done := r.projected[rec.ID] == src.ResourceVersion
	r.mu.Unlock()
	if done {
		return nil
	}
	consumer := *h.Spec.ConsumerRef
	var owner *computev1alpha1.Machine
	m := &computev1alpha1.Machine{}
	err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: consumer.Namespace, Name: consumer.Name}, m)
	switch {
	case err == nil && string(m.UID) == consumer.UID:
		owner = m
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	want := projection(consumer, src.Spec, owner)
	have := &metalv1alpha1.HardwareData{}
	err = r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.opts.Client.Create(ctx, want); err != nil {
			return err
		}
	case err != nil:
		return err
	case !projected(have):
		return nil // not a copy: never taken over
	case !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) || have.Annotations[AnnotationMachineUID] != consumer.UID ||
		!apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) || !apiequality.Semantic.DeepEqual(have.Labels, want.Labels):
		// A copy left by an earlier Machine of the same name is taken over.
		have.Spec, have.Labels, have.OwnerReferences = want.Spec, want.Labels, want.OwnerReferences
		have.Annotations = want.Annotations
		if err := r.opts.Client.Update(ctx, have); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.projected[rec.ID] = src.ResourceVersion
	r.mu.Unlock()
	return nil
}

// unproject deletes the tenant's copy, unless another Machine of the same name took it.
func (r *Runtime) unproject(ctx context.Context, consumer metalv1alpha1.ConsumerReference) error {
	have := &metalv1alpha1.HardwareData{}
	err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: consumer.Namespace, Name: consumer.Name}, have)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if !projected(have) || have.Annotations[AnnotationMachineUID] != consumer.UID {
		return nil
	}
	return client.IgnoreNotFound(r.opts.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID, ResourceVersion: &have.ResourceVersion}))
}
