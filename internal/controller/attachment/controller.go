package attachment

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
)

// Reconciler writes a Machine's VolumesReady and NetworkInterfacesReady conditions.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines/status,verbs=get;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=volumes;networkinterfaces,verbs=get;list;watch

// Reconcile computes both conditions and patches them in one write when either changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &computev1alpha1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.ensureEphemeral(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	var want []metav1.Condition
	if devs := volumeDevices(m); len(devs) > 0 {
		refs, err := r.lookup(ctx, m.Namespace, devs, func() client.Object { return &computev1alpha1.Volume{} })
		if err != nil {
			return ctrl.Result{}, err
		}
		want = append(want, readiness(computev1alpha1.ConditionVolumesReady, "Volume", m, devs, refs, m.Status.Volumes))
	}
	if devs := nicDevices(m); len(devs) > 0 {
		refs, err := r.lookup(ctx, m.Namespace, devs, func() client.Object { return &computev1alpha1.NetworkInterface{} })
		if err != nil {
			return ctrl.Result{}, err
		}
		want = append(want, readiness(computev1alpha1.ConditionNetworkInterfacesReady, "NetworkInterface", m, devs, refs, m.Status.NetworkInterfaces))
	}
	if !changes(m.Status.Conditions, want) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	for _, c := range want {
		meta.SetStatusCondition(&m.Status.Conditions, c)
	}
	if err := r.Client.Status().Patch(ctx, m, patch); err != nil {
		if apierrors.IsConflict(err) {
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

func holderOf(o client.Object) *computev1alpha1.ClaimReference {
	switch v := o.(type) {
	case *computev1alpha1.Volume:
		return v.Status.ClaimRef
	case *computev1alpha1.NetworkInterface:
		return v.Status.ClaimRef
	}
	return nil
}

func (r *Reconciler) lookup(ctx context.Context, ns string, devs []device, newObj func() client.Object) (map[string]referenced, error) {
	refs := map[string]referenced{}
	for _, d := range devs {
		if d.ref == "" {
			continue
		}
		o := newObj()
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.ref}, o)
		switch {
		case apierrors.IsNotFound(err):
			refs[d.ref] = referenced{}
		case err != nil:
			return nil, err
		default:
			refs[d.ref] = referenced{exists: true, holder: holderOf(o)}
		}
	}
	return refs, nil
}

// changes reports whether any wanted condition differs from the present one in what a
// reader sees (status, reason, message, generation).
func changes(have []metav1.Condition, want []metav1.Condition) bool {
	for _, w := range want {
		h := meta.FindStatusCondition(have, w.Type)
		if h == nil || h.Status != w.Status || h.Reason != w.Reason || h.Message != w.Message || h.ObservedGeneration != w.ObservedGeneration {
			return true
		}
	}
	return false
}

// SetupWithManager watches Machines, and the Volumes and NetworkInterfaces they
// reference (through the field indexes, which must be registered before).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("attachment").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		For(&computev1alpha1.Machine{}).
		Watches(&computev1alpha1.Volume{}, handler.EnqueueRequestsFromMapFunc(r.referencing(index.MachineVolumeRefs))).
		Watches(&computev1alpha1.NetworkInterface{}, handler.EnqueueRequestsFromMapFunc(r.referencing(index.MachineNetworkInterfaceRefs))).
		Complete(r)
}

// referencing maps an object to the Machines of its namespace that reference it.
func (r *Reconciler) referencing(field string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		machines := &computev1alpha1.MachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingFields{field: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(machines.Items))
		for _, m := range machines.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
		return reqs
	}
}
