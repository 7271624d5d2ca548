package capi

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
)

// Installed says whether the kinds the provider needs are served: Cluster API's Clusters
// and Machines (v1beta2) and anvil's provider kinds. Missing ones are named in the error.
func Installed(mapper meta.RESTMapper) error {
	for _, gvk := range []struct{ group, version, kind string }{
		{clusterv1.GroupVersion.Group, clusterv1.GroupVersion.Version, "Cluster"},
		{clusterv1.GroupVersion.Group, clusterv1.GroupVersion.Version, "Machine"},
		{infrav1.GroupVersion.Group, infrav1.GroupVersion.Version, "AnvilCluster"},
		{infrav1.GroupVersion.Group, infrav1.GroupVersion.Version, "AnvilMachine"},
		{infrav1.GroupVersion.Group, infrav1.GroupVersion.Version, "AnvilRemediation"},
	} {
		if _, err := mapper.RESTMapping(schemaGK(gvk.group, gvk.kind), gvk.version); err != nil {
			return fmt.Errorf("%s %s/%s is not served (install Cluster API's CRDs and anvil's provider CRDs, config/crd/capi): %w", gvk.kind, gvk.group, gvk.version, err)
		}
	}
	return nil
}

// Options are the provider's knobs.
type Options struct {
	// Concurrency is how many objects of one kind each controller reconciles at once.
	Concurrency int
	// AllowLoopback lets identityRef kubeconfigs name control planes on loopback addresses
	// (--capi-identity-allow-loopback); link-local and metadata addresses stay refused.
	AllowLoopback bool
	// EndpointGrace is how long a control-plane machine runs before its cluster's
	// endpoint, accepting no connection, is called unreachable on its AnvilMachine
	// (ControlPlaneEndpointReachable False); zero calls it so at the first refused dial.
	EndpointGrace time.Duration
}

// Setup registers the AnvilCluster, AnvilMachine and AnvilRemediation controllers with the
// manager. The controllers watch this anvil's Machines, and those of every other anvil an
// AnvilCluster's identityRef names once it is first used. The Computes it returns find
// those Machines for others (the in-place update extension), through the same caches.
func Setup(mgr ctrl.Manager, o Options) (*Computes, error) {
	c := mgr.GetClient()
	concurrency := o.Concurrency
	computes := &Computes{Local: Compute{Client: c, Reader: mgr.GetAPIReader()}, Scheme: mgr.GetScheme(), APIReader: mgr.GetAPIReader(),
		AllowLoopback: o.AllowLoopback}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		computes.setContext(ctx)
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	options := controller.Options{MaxConcurrentReconciles: concurrency}

	machines := &AnvilMachineReconciler{Client: c, APIReader: mgr.GetAPIReader(), Computes: computes, EndpointGrace: o.EndpointGrace,
		Events: events.New(mgr.GetEventRecorder("anvilmachine"), nil)}
	machineController, err := ctrl.NewControllerManagedBy(mgr).Named("anvilmachine").
		For(&infrav1.AnvilMachine{}).
		// Owner references, bootstrap data and failure domains come from the Machine.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(infraMachineOf)).
		// Paused and infrastructure provisioned come from the Cluster.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return anvilMachinesOfCluster(ctx, c, o)
		}), builder.WithPredicates(clusterGate)).
		// What the anvil Machine reports is the AnvilMachine's status.
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(anvilMachineIn(""))).
		WithOptions(options).
		Build(machines)
	if err != nil {
		return nil, err
	}

	remediations := &AnvilRemediationReconciler{Client: c, Computes: computes, Events: events.New(mgr.GetEventRecorder("anvilremediation"), nil)}
	remediationController, err := ctrl.NewControllerManagedBy(mgr).Named("anvilremediation").
		For(&infrav1.AnvilRemediation{}).
		// A power cycle goes on once the runtime reports the machine off.
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(remediationIn(c, "")), builder.WithPredicates(stateChanged)).
		WithOptions(options).
		Build(remediations)
	if err != nil {
		return nil, err
	}

	// Another anvil's Machines map to the objects of the AnvilCluster's namespace here.
	computes.OnRemote = func(remote cluster.Cluster, namespace string) error {
		if err := machineController.Watch(source.Kind(remote.GetCache(), client.Object(&computev1alpha1.Machine{}),
			handler.EnqueueRequestsFromMapFunc(anvilMachineIn(namespace)))); err != nil {
			return err
		}
		return remediationController.Watch(source.Kind(remote.GetCache(), client.Object(&computev1alpha1.Machine{}),
			handler.EnqueueRequestsFromMapFunc(remediationIn(c, namespace)), stateChanged))
	}

	clusters := &AnvilClusterReconciler{Client: c, Computes: computes, Events: events.New(mgr.GetEventRecorder("anvilcluster"), nil)}
	return computes, ctrl.NewControllerManagedBy(mgr).Named("anvilcluster").
		For(&infrav1.AnvilCluster{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(infraClusterOf), builder.WithPredicates(clusterGate)).
		// The endpoint may come from the first control-plane machine's address.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return anvilClusterOfMachine(ctx, c, o)
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, ok := o.GetLabels()[clusterv1.MachineControlPlaneLabel]
			return ok
		}))).
		// The endpoint may come from the cluster's LoadBalancer.
		Watches(&computev1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(anvilClusterOfLoadBalancer)).
		// Failure domains are the pools' labels.
		Watches(&computev1alpha1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return allAnvilClusters(ctx, c)
		}), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(options).
		Complete(clusters)
}

// stateChanged passes the anvil Machine updates that change its state.
var stateChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.(*computev1alpha1.Machine).Status.State != e.ObjectNew.(*computev1alpha1.Machine).Status.State
}}

// clusterGate passes the Cluster changes the provider acts on: pause, ownership of its
// infrastructure, infrastructure provisioned.
var clusterGate = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	a, b := e.ObjectOld.(*clusterv1.Cluster), e.ObjectNew.(*clusterv1.Cluster)
	return !equality.Semantic.DeepEqual(a.Spec.Paused, b.Spec.Paused) ||
		!equality.Semantic.DeepEqual(a.Spec.InfrastructureRef, b.Spec.InfrastructureRef) ||
		!equality.Semantic.DeepEqual(a.Status.Initialization, b.Status.Initialization) ||
		!equality.Semantic.DeepEqual(a.Annotations, b.Annotations)
}}

func infraMachineOf(_ context.Context, o client.Object) []reconcile.Request {
	ref := o.(*clusterv1.Machine).Spec.InfrastructureRef
	if ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "AnvilMachine" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
}

// anvilClusterOfLoadBalancer maps a LoadBalancer the provider made to its AnvilCluster.
func anvilClusterOfLoadBalancer(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[infrav1.AnvilClusterLabel]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func infraClusterOf(_ context.Context, o client.Object) []reconcile.Request {
	ref := o.(*clusterv1.Cluster).Spec.InfrastructureRef
	if ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "AnvilCluster" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
}

// anvilMachineIn maps an anvil Machine the provider made to its AnvilMachine, which has
// its name in namespace (for this anvil's Machines, their own namespace).
func anvilMachineIn(namespace string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[infrav1.AnvilMachineLabel]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: localNamespace(namespace, o), Name: name}}}
	}
}

// localNamespace is namespace, or o's own for this anvil's objects (namespace empty).
func localNamespace(namespace string, o client.Object) string {
	if namespace == "" {
		return o.GetNamespace()
	}
	return namespace
}

func anvilMachinesOfCluster(ctx context.Context, c client.Client, o client.Object) []reconcile.Request {
	list := &infrav1.AnvilMachineList{}
	if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the AnvilMachines of a Cluster")
		return nil
	}
	var out []reconcile.Request
	for _, am := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&am)})
	}
	return out
}

func anvilClusterOfMachine(ctx context.Context, c client.Client, o client.Object) []reconcile.Request {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.(*clusterv1.Machine).Spec.ClusterName}, cluster); err != nil {
		return nil
	}
	return infraClusterOf(ctx, cluster)
}

func allAnvilClusters(ctx context.Context, c client.Client) []reconcile.Request {
	list := &infrav1.AnvilClusterList{}
	if err := c.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing AnvilClusters")
		return nil
	}
	var out []reconcile.Request
	for _, ac := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ac)})
	}
	return out
}

// remediationIn maps an anvil Machine the provider made to the remediation of its Cluster
// API Machine (a MachineHealthCheck names it after that Machine), in namespace here (empty:
// the anvil Machine's own).
func remediationIn(c client.Client, namespace string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[infrav1.AnvilMachineLabel]
		if !ok {
			return nil
		}
		am := &infrav1.AnvilMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: localNamespace(namespace, o), Name: name}, am); err != nil {
			return nil
		}
		if machine := ownerName(am, "Machine"); machine != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: am.Namespace, Name: machine}}}
		}
		return nil
	}
}
