package capi

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/anvilmachine"
	"github.com/anvil-dev/anvil/internal/events"
)

// waitingRecheck is how soon an AnvilMachine waiting for something not watched (its
// bootstrap data Secret, which is read uncached) is looked at again.
const waitingRecheck = 10 * time.Second

// connectingRecheck is how soon an object whose identity's connection is under way is
// looked at again.
const connectingRecheck = 2 * time.Second

// AnvilMachineReconciler makes and reports one anvil Machine per AnvilMachine.
type AnvilMachineReconciler struct {
	Client client.Client
	// APIReader reads bootstrap data Secrets without caching every Secret.
	APIReader client.Reader
	// Computes says where each cluster's anvil Machines live.
	Computes *Computes
	Events   *events.Recorder
	// EndpointGrace is how long a control-plane machine runs before its cluster's endpoint,
	// accepting no connection, is called unreachable (Options.EndpointGrace).
	EndpointGrace time.Duration
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch

// Reconcile brings one AnvilMachine's anvil Machine and status to what anvilmachine decides.
func (r *AnvilMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	am := &infrav1.AnvilMachine{}
	if ok, err := getOptional(ctx, r.Client, req.NamespacedName, am); !ok {
		return ctrl.Result{}, err
	}
	machine, cluster, ac, err := r.owners(ctx, am)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := am.DeepCopy()
	isPaused := paused(cluster, am)
	apimeta.SetStatusCondition(&am.Status.Conditions, pausedCondition(isPaused, am.Generation))
	if isPaused {
		return ctrl.Result{}, r.patch(ctx, am, base)
	}
	compute, err := r.Computes.For(ctx, ac)
	if err != nil {
		// The AnvilCluster says so too. Its anvil Machine, if any, is left as it is: never
		// forgotten while it cannot be reached, so the finalizer stays.
		apimeta.SetStatusCondition(&am.Status.Conditions, withGeneration(identityUnusable(err), am.Generation))
		return ctrl.Result{RequeueAfter: recheckIdentity(err)}, r.patch(ctx, am, base)
	}
	ctx, cancel := compute.bound(ctx)
	defer cancel()
	namespace := compute.namespaceFor(am.Namespace)
	existing, err := anvilMachineOf(ctx, compute, am, namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if am.DeletionTimestamp != nil {
		return r.delete(ctx, compute, am, base, existing)
	}
	if !controllerutil.ContainsFinalizer(am, infrav1.FinalizerAnvilMachine) {
		// Before any anvil Machine is made, so none outlives its AnvilMachine unseen.
		controllerutil.AddFinalizer(am, infrav1.FinalizerAnvilMachine)
		if err := r.Client.Update(ctx, am); err != nil {
			return conflictOr(err)
		}
		base = am.DeepCopy()
	}
	in := anvilmachine.Input{AnvilMachine: am, Machine: machine, Namespace: namespace, Existing: existing, Local: !compute.Remote}
	if in.FirstBootSecret, err = firstBootSecretOf(ctx, compute, am, namespace); err != nil {
		return ctrl.Result{}, err
	}
	if cluster != nil {
		in.ClusterInfrastructureProvisioned = cluster.Status.Initialization.InfrastructureProvisioned != nil && *cluster.Status.Initialization.InfrastructureProvisioned
	}
	if ac != nil {
		in.FailureDomainLabel = ac.Spec.FailureDomainLabel
		if ac.Spec.ControlPlaneLoadBalancer != nil {
			in.LoadBalancer = &anvilmachine.LoadBalancer{Endpoint: ac.Spec.ControlPlaneEndpoint}
			if st := ac.Status.ControlPlaneLoadBalancer; st != nil {
				in.LoadBalancer.SegmentEndpoint = st.SegmentEndpoint
			}
		}
	}
	if in.Bootstrap, err = r.bootstrap(ctx, machine); err != nil {
		return ctrl.Result{}, err
	}
	if in.PoolLabels, err = poolLabels(ctx, compute, existing); err != nil {
		return ctrl.Result{}, err
	}
	if existing == nil && machine != nil && am.Spec.ProviderID == "" {
		// Only a machine to be made needs its data template: what it boots is fixed then.
		fill, err := r.renderDataTemplate(ctx, am, machine.Spec.ClusterName)
		if err != nil {
			return conflictOr(err)
		}
		if fill.Refusal != nil {
			apimeta.SetStatusCondition(&am.Status.Conditions, withGeneration(*fill.Refusal, am.Generation))
			return ctrl.Result{RequeueAfter: waitingRecheck}, r.patch(ctx, am, base)
		}
		in.Hostname, in.MetaData, in.HardwareMetaData = fill.Hostname, fill.MetaData, fill.HardwareMetaData
	}
	plan := anvilmachine.Decide(in)
	if err := r.apply(ctx, compute, am, existing, in.FirstBootSecret, plan); err != nil {
		return conflictOr(err)
	}
	base = am.DeepCopy() // apply may have updated the spec and annotations
	setStatus(am, plan)
	recheck := r.reachability(ctx, am, machine, cluster)
	if err := r.patch(ctx, am, base); err != nil {
		return conflictOr(err)
	}
	if waitsUnwatched(plan.Ready.Reason) {
		recheck = waitingRecheck
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// owners reads the AnvilMachine's Cluster API Machine, its Cluster (named by the Machine,
// or by the AnvilMachine's cluster-name label while the Machine is gone) and the Cluster's
// AnvilCluster; each is nil until it exists.
func (r *AnvilMachineReconciler) owners(ctx context.Context, am *infrav1.AnvilMachine) (*clusterv1.Machine, *clusterv1.Cluster, *infrav1.AnvilCluster, error) {
	clusterName := am.Labels[clusterv1.ClusterNameLabel]
	var machine *clusterv1.Machine
	if name := ownerName(am, "Machine"); name != "" {
		m := &clusterv1.Machine{}
		ok, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: am.Namespace, Name: name}, m)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			machine, clusterName = m, m.Spec.ClusterName
		}
	}
	cluster, ac, err := clusterOf(ctx, r.Client, am.Namespace, clusterName)
	return machine, cluster, ac, err
}

// anvilMachineOf is the anvil Machine of am in compute, nil if there is none.
func anvilMachineOf(ctx context.Context, compute Compute, am *infrav1.AnvilMachine, namespace string) (*computev1alpha1.Machine, error) {
	ns, name, err := anvilmachine.MachineKey(am, namespace)
	if err != nil {
		return nil, nil // a foreign providerID: Decide says so, and nothing there is read
	}
	m := &computev1alpha1.Machine{}
	if ok, err := getOptional(ctx, compute.Client, client.ObjectKey{Namespace: ns, Name: name}, m); !ok {
		return nil, err
	}
	return m, nil
}

// bootstrap reads the Machine's bootstrap data Secret, nil if it names none or it is missing.
func (r *AnvilMachineReconciler) bootstrap(ctx context.Context, machine *clusterv1.Machine) (*corev1.Secret, error) {
	if machine == nil || machine.Spec.Bootstrap.DataSecretName == nil || *machine.Spec.Bootstrap.DataSecretName == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	if ok, err := getOptional(ctx, r.APIReader, client.ObjectKey{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, s); !ok {
		return nil, err
	}
	return s, nil
}

// poolLabels are the labels of the pool m runs on, nil if none or unknown (an identity
// for another anvil may not read its pools: the machine then has no failure domain).
func poolLabels(ctx context.Context, compute Compute, m *computev1alpha1.Machine) (map[string]string, error) {
	if m == nil || m.Status.Pool == "" {
		return nil, nil
	}
	pool := &computev1alpha1.MachinePool{}
	ok, err := getOptional(ctx, compute.Reader, client.ObjectKey{Name: m.Status.Pool}, pool)
	if !ok {
		return nil, ignoreForbidden(err)
	}
	return pool.Labels, nil
}

// apply carries out the plan's writes in its order: the first-boot Secret, the anvil
// Machine (created, or its image changed), then the AnvilMachine's providerID and
// block-move annotation.
func (r *AnvilMachineReconciler) apply(ctx context.Context, compute Compute, am *infrav1.AnvilMachine, existing *computev1alpha1.Machine, secret *corev1.Secret, p anvilmachine.Plan) error {
	if p.Secret != nil {
		if err := ensureSecret(ctx, compute, p.Secret, secret); err != nil {
			return fmt.Errorf("first-boot Secret %s/%s: %w", p.Secret.Namespace, p.Secret.Name, err)
		}
	}
	if p.Create != nil {
		switch err := compute.Client.Create(ctx, p.Create); {
		case err == nil:
			r.Events.Normal(am, "MachineCreated", "Create", "created anvil Machine %s/%s", p.Create.Namespace, p.Create.Name)
		case apierrors.IsAlreadyExists(err):
			// Made by an earlier reconcile the cache has not shown yet: Decide looks at it next time.
		default:
			r.Events.Warning(am, "MachineRefused", "Create", "anvil refused Machine %s/%s: %v", p.Create.Namespace, p.Create.Name, err)
			return err
		}
	}
	if p.Image != "" && existing != nil {
		// The anvil Machine Decide saw: the optimistic lock refuses it if it changed since.
		m := existing.DeepCopy()
		base := existing
		m.Spec.Image = p.Image
		if err := compute.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		r.Events.Normal(am, "Reimaging", "Update", "anvil Machine %s/%s reimages to %s", m.Namespace, m.Name, p.Image)
	}
	_, blocked := am.Annotations[infrav1.AnnotationBlockMove]
	if p.ProviderID == "" && blocked == p.BlockMove {
		return nil
	}
	want := am.DeepCopy()
	if p.ProviderID != "" {
		want.Spec.ProviderID = p.ProviderID
	}
	if p.BlockMove {
		metav1.SetMetaDataAnnotation(&want.ObjectMeta, infrav1.AnnotationBlockMove, "true")
	} else {
		delete(want.Annotations, infrav1.AnnotationBlockMove)
	}
	if err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(am, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	*am = *want
	return nil
}

// firstBootSecretOf is the Secret at the name of am's first-boot Secret, nil if none (or the
// providerID is foreign: Decide says so).
func firstBootSecretOf(ctx context.Context, compute Compute, am *infrav1.AnvilMachine, namespace string) (*corev1.Secret, error) {
	ns, name, err := anvilmachine.MachineKey(am, namespace)
	if err != nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	if ok, err := getOptional(ctx, compute.Reader, client.ObjectKey{Namespace: ns, Name: name}, s); !ok {
		return nil, err
	}
	return s, nil
}

// ensureSecret creates want or brings have, the Secret Decide saw (and found the
// provider's), to its data and labels. The optimistic lock refuses a patch of a Secret that
// changed since it was read.
func ensureSecret(ctx context.Context, compute Compute, want, have *corev1.Secret) error {
	switch {
	case have == nil:
		return compute.Client.Create(ctx, want)
	case maps.EqualFunc(have.Data, want.Data, bytes.Equal) && labels.SelectorFromSet(want.Labels).Matches(labels.Set(have.Labels)):
		return nil
	}
	have = have.DeepCopy()
	base := have.DeepCopy()
	have.Data = want.Data
	for k, v := range want.Labels {
		metav1.SetMetaDataLabel(&have.ObjectMeta, k, v)
	}
	return compute.Client.Patch(ctx, have, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// delete lets the AnvilMachine go once its anvil Machine is (or, for a move, stays).
func (r *AnvilMachineReconciler) delete(ctx context.Context, compute Compute, am, base *infrav1.AnvilMachine, existing *computev1alpha1.Machine) (ctrl.Result, error) {
	plan := anvilmachine.DecideDelete(am, existing)
	if plan.DeleteMachine {
		if err := compute.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.Events.Normal(am, "MachineDeleting", "Delete", "deleting anvil Machine %s/%s", existing.Namespace, existing.Name)
	}
	if plan.RemoveFinalizer {
		if _, moved := am.Annotations[infrav1.AnnotationDeleteForMove]; !moved {
			// The machine is gone, so its index may be given again (a moved one lives on).
			if err := r.releaseIndex(ctx, am); err != nil {
				return conflictOr(err)
			}
		}
		if controllerutil.RemoveFinalizer(am, infrav1.FinalizerAnvilMachine) {
			return conflictOr(r.Client.Update(ctx, am))
		}
		return ctrl.Result{}, nil
	}
	apimeta.SetStatusCondition(&am.Status.Conditions, withGeneration(plan.Ready, am.Generation))
	return conflictOr(r.patch(ctx, am, base))
}

func (r *AnvilMachineReconciler) patch(ctx context.Context, am, base *infrav1.AnvilMachine) error {
	return client.IgnoreNotFound(patchStatus(ctx, r.Client, am, base))
}

// setStatus writes the plan's status into am.
func setStatus(am *infrav1.AnvilMachine, p anvilmachine.Plan) {
	st := &am.Status
	if p.Provisioned {
		st.Initialization.Provisioned = new(true)
	}
	st.Addresses = p.Addresses
	st.FailureDomain = p.FailureDomain
	st.ObservedGeneration = am.Generation
	apimeta.SetStatusCondition(&st.Conditions, withGeneration(p.Ready, am.Generation))
}

// identityUnusable is the Ready condition of an object whose cluster's identityRef cannot be used.
func identityUnusable(err error) metav1.Condition {
	return metav1.Condition{Type: infrav1.ConditionReady, Status: metav1.ConditionFalse, Reason: infrav1.ReasonIdentityUnusable, Message: err.Error()}
}

// waitsUnwatched says whether a Ready reason waits for something no watch reports.
func waitsUnwatched(reason string) bool {
	switch reason {
	case infrav1.ReasonBootstrapDataNotFound, infrav1.ReasonBootstrapDataInvalid, infrav1.ReasonBootstrapDataNotOwned, infrav1.ReasonSecretNameTaken,
		// The AnvilCluster's status is not watched here.
		infrav1.ReasonWaitingForLoadBalancer:
		return true
	}
	return false
}

// recheckIdentity is how soon an object whose identity could not be used is looked at again.
func recheckIdentity(err error) time.Duration {
	if isConnecting(err) {
		return connectingRecheck
	}
	return waitingRecheck
}
