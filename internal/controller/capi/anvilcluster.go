package capi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/anvilcluster"
	"github.com/anvil-dev/anvil/internal/events"
)

// AnvilClusterReconciler reports AnvilClusters: provisioned, endpoint, failure domains.
type AnvilClusterReconciler struct {
	Client client.Client
	// Computes says where each cluster's anvil Machines live.
	Computes *Computes
	Events   *events.Recorder
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=loadbalancers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;patch

// Reconcile brings one AnvilCluster's endpoint and status to what anvilcluster decides.
func (r *AnvilClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ac := &infrav1.AnvilCluster{}
	if ok, err := getOptional(ctx, r.Client, req.NamespacedName, ac); !ok {
		if err == nil {
			r.Computes.Forget(req.NamespacedName) // deleted, or moved away
		}
		return ctrl.Result{}, err
	}
	in := anvilcluster.Input{AnvilCluster: ac}
	if name := ownerName(ac, "Cluster"); name != "" {
		cluster := &clusterv1.Cluster{}
		ok, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: ac.Namespace, Name: name}, cluster)
		if err != nil {
			return ctrl.Result{}, err
		}
		if ok {
			in.Cluster = cluster
		}
	}
	base := ac.DeepCopy()
	isPaused := paused(in.Cluster, ac)
	apimeta.SetStatusCondition(&ac.Status.Conditions, pausedCondition(isPaused, ac.Generation))
	if isPaused || ac.DeletionTimestamp != nil {
		return conflictOr(client.IgnoreNotFound(patchStatus(ctx, r.Client, ac, base)))
	}
	if err := r.moveIdentity(ctx, ac, in.Cluster); err != nil {
		return conflictOr(err)
	}
	compute, err := r.Computes.For(ctx, ac)
	in.IdentityErr = err
	if err == nil {
		remoteCtx, cancel := compute.bound(ctx)
		defer cancel()
		in.Namespace, in.Local = compute.namespaceFor(ac.Namespace), !compute.Remote
		if in.PoolLabels, err = usablePoolLabels(remoteCtx, compute, in.Namespace); err != nil {
			return ctrl.Result{}, err
		}
		if ac.Spec.ControlPlaneLoadBalancer != nil {
			if in.LoadBalancer, err = loadBalancerOf(remoteCtx, compute, in.Namespace, ac.Name); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if in.Cluster != nil && !ac.Spec.ControlPlaneEndpoint.IsValid() {
		machines := &clusterv1.MachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(ac.Namespace),
			client.MatchingLabels{clusterv1.ClusterNameLabel: in.Cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
			return ctrl.Result{}, err
		}
		in.ControlPlaneMachines = machines.Items
	}
	plan := anvilcluster.Decide(in)
	if plan.CreateLoadBalancer != nil {
		remoteCtx, cancel := compute.bound(ctx)
		defer cancel()
		switch err := compute.Client.Create(remoteCtx, plan.CreateLoadBalancer); {
		case err == nil:
			r.Events.Normal(ac, "LoadBalancerCreated", "Create", "created LoadBalancer %s/%s for the control-plane endpoint",
				plan.CreateLoadBalancer.Namespace, plan.CreateLoadBalancer.Name)
		case !apierrors.IsAlreadyExists(err): // one made since the cache was read is looked at next time
			return ctrl.Result{}, err
		}
	}
	if plan.Endpoint != nil {
		want := ac.DeepCopy()
		want.Spec.ControlPlaneEndpoint = *plan.Endpoint
		if err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(ac, client.MergeFromWithOptimisticLock{})); err != nil {
			return conflictOr(err)
		}
		r.Events.Normal(want, "ControlPlaneEndpoint", "Update", "control plane endpoint %s:%d, from the first control-plane machine", plan.Endpoint.Host, plan.Endpoint.Port)
		*ac = *want // as the apiserver returned it: the status is set anew below
		base = ac.DeepCopy()
	}
	apimeta.SetStatusCondition(&ac.Status.Conditions, pausedCondition(false, ac.Generation))
	if plan.Provisioned {
		ac.Status.Initialization.Provisioned = new(true)
	}
	ac.Status.FailureDomains = plan.FailureDomains
	ac.Status.ControlPlaneLoadBalancer = plan.LoadBalancer
	ac.Status.ObservedGeneration = ac.Generation
	apimeta.SetStatusCondition(&ac.Status.Conditions, withGeneration(plan.Ready, ac.Generation))
	if err := patchStatus(ctx, r.Client, ac, base); err != nil {
		return conflictOr(client.IgnoreNotFound(err))
	}
	if in.IdentityErr != nil {
		// The identity Secret is not watched (Secrets are read uncached): look again.
		return ctrl.Result{RequeueAfter: recheckIdentity(in.IdentityErr)}, nil
	}
	if compute.Remote && plan.Ready.Reason == infrav1.ReasonWaitingForLoadBalancer {
		// Another anvil's LoadBalancers are not watched: look again.
		return ctrl.Result{RequeueAfter: waitingRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// loadBalancerOf is the LoadBalancer named like the AnvilCluster where its anvil Machines
// live; nil if there is none. This anvil's come from the cache (they are watched); another
// anvil's are read directly.
func loadBalancerOf(ctx context.Context, compute Compute, namespace, name string) (*computev1alpha1.LoadBalancer, error) {
	var r client.Reader = compute.Client
	if compute.Remote {
		r = compute.Reader
	}
	lb := &computev1alpha1.LoadBalancer{}
	ok, err := getOptional(ctx, r, client.ObjectKey{Namespace: namespace, Name: name}, lb)
	if !ok {
		return nil, err
	}
	return lb, nil
}

// usablePoolLabels are the labels of the pools namespace ns may use (their tenants). An
// identity for another anvil may not list its pools or read its namespace: no failure
// domains, or only those of pools open to every namespace, then.
func usablePoolLabels(ctx context.Context, compute Compute, ns string) ([]map[string]string, error) {
	pools := &computev1alpha1.MachinePoolList{}
	if err := compute.Reader.List(ctx, pools); err != nil {
		return nil, ignoreForbidden(err)
	}
	namespace := &corev1.Namespace{}
	if _, err := getOptional(ctx, compute.Reader, client.ObjectKey{Name: ns}, namespace); ignoreForbidden(err) != nil {
		return nil, err
	}
	return anvilcluster.UsablePoolLabels(pools.Items, ns, namespace.Labels), nil
}

// moveIdentity labels the AnvilCluster's identityRef Secret for `clusterctl move`: it is
// neither owned by nor named after the Cluster, so a move would leave it behind and the new
// management cluster could not reach the anvil Machines. A label rather than an owner
// reference: the Secret may serve several clusters and must not be garbage collected with
// one. Only a Secret its writer marked as the cluster's (label cluster.x-k8s.io/cluster-name)
// is labelled: the provider never relabels a Secret it has no claim on (otherwise the user
// labels it). A missing Secret is the identity's condition to report, not an error here.
func (r *AnvilClusterReconciler) moveIdentity(ctx context.Context, ac *infrav1.AnvilCluster, cluster *clusterv1.Cluster) error {
	if ac.Spec.IdentityRef == nil || cluster == nil {
		return nil
	}
	s := &corev1.Secret{}
	if ok, err := getOptional(ctx, r.Computes.APIReader, client.ObjectKey{Namespace: ac.Namespace, Name: ac.Spec.IdentityRef.Name}, s); !ok {
		return err
	}
	if _, ok := s.Labels[infrav1.LabelMove]; ok || s.Labels[clusterv1.ClusterNameLabel] != cluster.Name {
		return nil
	}
	base := s.DeepCopy()
	metav1.SetMetaDataLabel(&s.ObjectMeta, infrav1.LabelMove, "")
	return r.Client.Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
