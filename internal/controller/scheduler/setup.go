package scheduler

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// SetupWithManager registers the scheduler with mgr. Concurrency is how many bindings may
// be in flight at once; decisions themselves are serialised by the Cache.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if r.Strategy == scheduler.StrategyUnspecified {
		return fmt.Errorf("scheduler: no strategy set")
	}
	if r.Cache == nil {
		r.Cache = scheduler.NewCache()
	}
	if r.Resolver == nil {
		r.Resolver = UnrestrictedImages{}
	}
	if r.ImageRetry == 0 {
		r.ImageRetry = 20 * time.Second
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.RefusalBackoff == 0 {
		r.RefusalBackoff = 5 * time.Minute
	}
	r.queue = scheduler.NewQueue(r.RefusalBackoff)
	return ctrl.NewControllerManagedBy(mgr).
		Named("scheduler").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Watches(&computev1alpha1.MachineClass{}, r.classHandler()).
		Watches(&computev1alpha1.MachinePool{}, r.poolHandler()).
		Watches(&coordinationv1.Lease{}, r.leaseHandler()).
		Watches(&corev1.Namespace{}, r.namespaceHandler()).
		Watches(&computev1alpha1.Machine{}, r.machineHandler()).
		Complete(r)
}
