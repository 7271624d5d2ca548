package poollet

import (
	"context"
	"fmt"
	"github.com/anvil-dev/anvil/internal/events"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/apiauth"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/poollet/consoleproxy"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// Options configure one poollet.
type Options struct {
	Pool       string
	ProviderID string
	Labels     map[string]string
	Runtime    mriv1alpha1.MachineRuntimeClient
	Images     ImageResolver
	// ImageFolders hold the images of the registries the pool reads with its own
	// credential to the Machine's namespace's folder and the shared ones (imageowner.FoldersFor).
	ImageFolders []imageowner.Folders
	// Interval is how often the runtime's capacity is read and the Lease renewed.
	Interval time.Duration
	// LeaseDuration is how long the pool counts as alive after a renewal.
	LeaseDuration time.Duration
	// StuckAfter is how long a runtime step may lag before its call is repeated.
	StuckAfter time.Duration
	// MaxOrphans is how many runtime machines without a Machine of the pool the poollet
	// deletes on its own; with more, it keeps them all and says so (OrphansHeld).
	MaxOrphans  int
	Concurrency int
	QPS         float32
	Burst       int
	// MetricsAddr serves metrics; "0" turns them off.
	MetricsAddr string
	// SkipControllerNameValidation allows several poollets in one process (anvil dev,
	// tests, scale runs).
	SkipControllerNameValidation bool
	// ConsoleAddress, when set (host:port, port 0 for any), is where the poollet serves its
	// pool's consoles (consoleproxy), published in the MachinePool's status.
	ConsoleAddress string
}

// DefaultOptions suit a poollet next to its runtime.
func DefaultOptions(pool string) Options {
	return Options{Pool: pool, Images: NewRegistryImages(registrynet.Policy{}), Interval: 10 * time.Second, LeaseDuration: 40 * time.Second,
		StuckAfter: 30 * time.Second, MaxOrphans: 10, Concurrency: 8, QPS: 50, Burst: 100, MetricsAddr: "0"}
}

// New returns a manager running the poollet; Start runs it.
func New(cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.Pool == "" || o.Runtime == nil || o.Images == nil {
		return nil, fmt.Errorf("poollet: a pool name, a runtime and an image resolver are required")
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: o.MetricsAddr},
		Cache: cache.Options{NewInformer: watchstats.NewInformer("poollet"), ByObject: map[client.Object]cache.ByObject{
			// Only this pool's Machines, by the CRD's selectable field.
			&computev1alpha1.Machine{}:     {Field: fields.OneTermEqualSelector("spec.machinePoolRef.name", o.Pool)},
			&computev1alpha1.MachinePool{}: {Field: fields.OneTermEqualSelector("metadata.name", o.Pool)},
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{computev1alpha1.PoolLeaseNamespace: {}},
				Field: fields.OneTermEqualSelector("metadata.name", o.Pool)},
		}},
		Controller: config.Controller{SkipNameValidation: &o.SkipControllerNameValidation},
	})
	if err != nil {
		return nil, err
	}
	orphans := &orphanGuard{limit: o.MaxOrphans}
	pool := &PoolReconciler{Pool: o.Pool, ProviderID: o.ProviderID, Labels: o.Labels, Client: mgr.GetClient(),
		Runtime: o.Runtime, Interval: o.Interval, Orphans: orphans}
	if o.ConsoleAddress != "" {
		if pool.Console, err = serveConsoles(mgr, cfg, o); err != nil {
			return nil, err
		}
	}
	machines := &MachineReconciler{Pool: o.Pool, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Runtime: o.Runtime,
		Images: o.Images, ImageFolders: o.ImageFolders, Architectures: pool.Architectures, StuckAfter: o.StuckAfter, Orphans: orphans,
		Events: events.New(mgr.GetEventRecorder("poollet-"+o.Pool), nil), ServesConsoles: pool.Console != nil}
	events := &runtimeEvents{runtime: o.Runtime, out: make(chan event.TypedGenericEvent[*computev1alpha1.Machine], 1024)}
	poolKey := reconcile.Request{NamespacedName: client.ObjectKey{Name: o.Pool}}

	for _, r := range []manager.Runnable{
		manager.RunnableFunc(func(ctx context.Context) error { return ensurePool(ctx, mgr.GetClient(), pool) }),
		&heartbeat{pool: o.Pool, client: mgr.GetClient(), interval: renewEvery(o.Interval, o.LeaseDuration), duration: o.LeaseDuration},
		events,
	} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("pool-"+o.Pool).
		// Its own status writes give it nothing to do (and, in a burst of Machines, would
		// undo the batching below): the pool's creation, deletion and spec changes wake it.
		For(&computev1alpha1.MachinePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&computev1alpha1.MachineClass{}, handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{poolKey} })).
		// status.allocated follows the pool's Machines: only a change of what one holds wakes
		// the pool, not the stream of status writes its Machines see.
		Watches(&computev1alpha1.Machine{}, wakeSoon(poolKey, allocatedBatch), builder.WithPredicates(chargeChanged())).
		Complete(pool)
	if err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("machine-"+o.Pool).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Concurrency}).
		// Status-only changes are skipped: the poollet derives status from the runtime, so
		// its own writes (and other controllers' conditions) give it nothing to do.
		For(&computev1alpha1.Machine{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WatchesRawSource(source.Channel(events.out, &handler.TypedEnqueueRequestForObject[*computev1alpha1.Machine]{})).
		Complete(machines)
	if err != nil {
		return nil, err
	}
	return mgr, nil
}

// ensurePool creates the MachinePool when it does not exist, so the pool controller,
// which watches it, has something to reconcile.
func ensurePool(ctx context.Context, c client.Client, p *PoolReconciler) error {
	mp := &computev1alpha1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: p.Pool, Labels: p.Labels},
		Spec:       computev1alpha1.MachinePoolSpec{ProviderID: p.ProviderID},
	}
	if err := c.Create(ctx, mp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MachinePool %s: %w", p.Pool, err)
	}
	return nil
}

// serveConsoles adds the pool's console endpoint to mgr and returns what the pool's status
// says of it.
func serveConsoles(mgr manager.Manager, cfg *rest.Config, o Options) (*computev1alpha1.PoolConsoleEndpoint, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	auth, err := apiauth.New(context.Background(), cs, false) // tokens only: no request comes through kube-apiserver
	if err != nil {
		return nil, err
	}
	ep, err := consoleproxy.Listen(o.ConsoleAddress, &consoleproxy.Server{Runtime: o.Runtime, Gate: &consoleproxy.Gate{Auth: auth, Pool: o.Pool}})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(ep); err != nil {
		return nil, err
	}
	return &ep.Status, nil
}
