package attachment

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
)

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=volumes;networkinterfaces,verbs=create

// ensureEphemeral creates the Volumes and NetworkInterfaces of m's ephemeral templates
// that do not exist yet, owned by m. The claim controllers delete them once m is gone
// (and the garbage collector does too, in a cluster that runs one). An object of that
// name that belongs to someone else is left alone; readiness then names the holder.
func (r *Reconciler) ensureEphemeral(ctx context.Context, m *computev1alpha1.Machine) error {
	if !m.DeletionTimestamp.IsZero() {
		return nil
	}
	owner := []metav1.OwnerReference{{
		APIVersion: computev1alpha1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	var objs []client.Object
	for _, v := range m.Spec.Volumes {
		if v.Ephemeral != nil {
			objs = append(objs, &computev1alpha1.Volume{
				ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: index.EphemeralName(m.Name, v.Name),
					Labels: v.Ephemeral.VolumeTemplate.Labels, OwnerReferences: owner},
				Spec: v.Ephemeral.VolumeTemplate.Spec,
			})
		}
	}
	for _, n := range m.Spec.NetworkInterfaces {
		if n.Ephemeral != nil {
			objs = append(objs, &computev1alpha1.NetworkInterface{
				ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: index.EphemeralName(m.Name, n.Name),
					Labels: n.Ephemeral.NetworkInterfaceTemplate.Labels, OwnerReferences: owner},
				Spec: n.Ephemeral.NetworkInterfaceTemplate.Spec,
			})
		}
	}
	for _, o := range objs {
		// The cache answers first, so a Machine whose objects exist costs no API call.
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := r.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ephemeral %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}
