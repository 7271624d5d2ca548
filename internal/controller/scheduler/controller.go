package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// Reconciler binds unbound Machines to pools.
type Reconciler struct {
	Client   client.Client
	Cache    *scheduler.Cache
	Resolver ImageResolver
	// ImageFolders are the registries the manager reads with a credential of its own
	// (--registry-credentials; imageowner.FoldersFor): on them a Machine may name only its
	// namespace's folder and the shared ones. Checked before the Resolver reads anything,
	// so the scheduler never tells a tenant whether another namespace's image exists.
	ImageFolders []imageowner.Folders
	Strategy     scheduler.Strategy
	// RefusalBackoff is how long a pool whose runtime refused a Machine is excluded for it.
	// It is kept in memory: a restart forgets it (see package internal/scheduler for why).
	RefusalBackoff time.Duration
	// ImageRetry is how long a Machine whose image could not be read waits to try again.
	ImageRetry time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Events are the Scheduled and Unschedulable Events on Machines.
	Events *events.Recorder

	// queue holds the unschedulable Machines and the runtimes' refusals; SetupWithManager
	// makes it with RefusalBackoff.
	queue *scheduler.Queue
}

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines/status,verbs=get;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools;machineclasses,verbs=get;list;watch
// The admission policy anvil-machine-binding (config/admission) lets only holders of bind on a pool set a
// Machine's machinePoolRef to it.
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools,verbs=bind
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile places one Machine, or says why it cannot be placed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &computev1alpha1.Machine{}
	err := r.Client.Get(ctx, req.NamespacedName, m)
	gone := err != nil || !m.DeletionTimestamp.IsZero() || m.Status.State == computev1alpha1.MachineStateTerminated
	if gone || m.Spec.MachinePoolRef != nil {
		r.queue.SetPending(req.NamespacedName, false) // nothing to place
	}
	switch {
	case err != nil:
		return ctrl.Result{}, client.IgnoreNotFound(err)
	case gone:
		return ctrl.Result{}, r.releaseUnbound(ctx, m)
	case m.Spec.MachinePoolRef != nil:
		return r.reconcileBound(ctx, m)
	}
	if _, charged := r.Cache.ChargedPool(m.UID); charged {
		return ctrl.Result{}, nil // bound by us a moment ago; the informer has not caught up
	}
	return r.schedule(ctx, m)
}

func (r *Reconciler) schedule(ctx context.Context, m *computev1alpha1.Machine) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(m)
	class := r.Cache.Class(m.Spec.MachineClassRef.Name)
	if class == nil {
		return ctrl.Result{}, r.wait(ctx, m, computev1alpha1.ReasonClassNotFound,
			fmt.Sprintf("MachineClass %q does not exist", m.Spec.MachineClassRef.Name))
	}
	for _, f := range r.ImageFolders {
		if err := f.UseImage(m.Namespace, m.Spec.Image); err != nil {
			return ctrl.Result{}, r.wait(ctx, m, computev1alpha1.ReasonImageNotOwned, fmt.Sprintf("image: %v", err))
		}
	}
	archs, image, err := r.architectures(ctx, m, class)
	if refused := (*registrynet.RefusedError)(nil); errors.As(err, &refused) {
		// The tenant named a registry inside the site: no connection was made, and the
		// message names only what the tenant wrote.
		return ctrl.Result{}, r.setScheduled(ctx, m, metav1.ConditionFalse, computev1alpha1.ReasonRegistryRefused,
			fmt.Sprintf("image %s: %s", m.Spec.Image, refused.Public()))
	}
	if err != nil {
		// The registry is an outside clock: nothing in the cluster announces the image's
		// arrival or the registry's return, so look again later.
		return ctrl.Result{RequeueAfter: r.ImageRetry}, r.setScheduled(ctx, m, metav1.ConditionFalse,
			computev1alpha1.ReasonImageUnresolved, err.Error())
	}
	if archs == 0 {
		// No pool could ever fit: say which requirements contradict, not "N pools: ...".
		return ctrl.Result{}, r.wait(ctx, m, computev1alpha1.ReasonUnschedulable,
			fmt.Sprintf("no architecture satisfies the Machine (%s), its MachineClass (%s) and its image (%s) together",
				orAny(m.Spec.Architecture), archList(class.Architectures), archList(image)))
	}
	if len(m.Spec.RequiredImageAnnotations) > 0 {
		have, err := r.Resolver.Annotations(ctx, m.Spec.Image)
		if err != nil {
			return ctrl.Result{RequeueAfter: r.ImageRetry}, r.setScheduled(ctx, m, metav1.ConditionFalse,
				computev1alpha1.ReasonImageUnresolved, fmt.Sprintf("reading the annotations of image %s: %v", m.Spec.Image, err))
		}
		if unmet := scheduler.UnmetAnnotations(m.Spec.RequiredImageAnnotations, have); unmet != "" {
			// The tag may be pushed again with what it lacks: look again later.
			return ctrl.Result{RequeueAfter: r.ImageRetry}, r.setScheduled(ctx, m, metav1.ConditionFalse,
				computev1alpha1.ReasonImageRequirementsUnmet, fmt.Sprintf("image %s %s (requiredImageAnnotations)", m.Spec.Image, unmet))
		}
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: m.Namespace}, ns); err != nil {
		return ctrl.Result{}, err
	}
	now := r.Now()
	request := &scheduler.Request{
		Namespace:       m.Namespace,
		NamespaceLabels: labels.Set(ns.Labels),
		Class:           class,
		Architectures:   archs,
		NativeOnly:      m.Spec.Emulation == computev1alpha1.EmulationForbidden,
		PoolSelector:    m.Spec.MachinePoolSelector,
		Tolerations:     m.Spec.Tolerations,
	}
	p := scheduler.Place(r.Cache, r.queue, key, m.UID, request, now, r.Strategy)
	if p.Pool == "" {
		// A Machine already told it cannot be placed stays so while a new pool comes up:
		// being told again once the pool reports would not be news either.
		reason := computev1alpha1.ReasonUnschedulable
		if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); p.Waiting &&
			(c == nil || c.Reason != computev1alpha1.ReasonUnschedulable) {
			reason = computev1alpha1.ReasonWaitingForPools
		}
		err := r.setScheduled(ctx, m, metav1.ConditionFalse, reason, p.Message)
		return ctrl.Result{RequeueAfter: p.RetryAfter}, err
	}
	if err := r.bind(ctx, m, p.Pool); err != nil {
		r.Cache.Forget(m.UID)
		if apierrors.IsConflict(err) {
			// Our copy was stale; the informer will bring the new one. Not a failure.
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).V(1).Info("bound", "pool", p.Pool)
	r.Events.Normal(m, computev1alpha1.EventScheduled, "Bind", "bound to MachinePool %s", p.Pool)
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); c != nil {
		// Only a Machine that was once unschedulable carries the condition; clear it. The
		// common path writes once.
		return ctrl.Result{}, r.setScheduled(ctx, m, metav1.ConditionTrue, computev1alpha1.ReasonBound,
			fmt.Sprintf("bound to MachinePool %s", p.Pool))
	}
	return ctrl.Result{}, nil
}

// architectures is what the Machine may run: its pin, its class's and its image's. It
// also returns the image's own set.
func (r *Reconciler) architectures(ctx context.Context, m *computev1alpha1.Machine, class *scheduler.Class) (archs, image scheduler.ArchSet, err error) {
	archs, image = class.Architectures, scheduler.AnyArch
	if m.Spec.Architecture != "" {
		archs &= scheduler.ArchSetOf(m.Spec.Architecture)
	}
	offered, err := r.Resolver.Architectures(ctx, m.Spec.Image)
	if err != nil {
		return 0, 0, fmt.Errorf("resolving the architectures of image %s: %w", m.Spec.Image, err)
	}
	if offered != nil {
		image = scheduler.ArchSetOf(offered...)
	}
	return archs & image, image, nil
}

func archList(s scheduler.ArchSet) string {
	if s == scheduler.AnyArch {
		return "any"
	}
	var names []string
	for _, a := range s.List() {
		names = append(names, string(a))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func orAny(a computev1alpha1.Architecture) string {
	if a == "" {
		return "any"
	}
	return string(a)
}

// bind sets spec.machinePoolRef, only if the Machine is unchanged since we read it.
func (r *Reconciler) bind(ctx context.Context, m *computev1alpha1.Machine, pool string) error {
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[computev1alpha1.AnnotationBoundBy] = "scheduler"
	// From here a runtime machine may exist: the same write holds deletion for the poollet.
	controllerutil.AddFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
	return r.Client.Patch(ctx, m, patch)
}

// reconcileBound takes back a Machine whose runtime refused it, if the scheduler bound it.
func (r *Reconciler) reconcileBound(ctx context.Context, m *computev1alpha1.Machine) (ctrl.Result, error) {
	c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
	refused := c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonRuntimeRefused &&
		c.ObservedGeneration == m.Generation
	if !refused || m.Annotations[computev1alpha1.AnnotationBoundBy] != "scheduler" {
		return ctrl.Result{}, nil // a user's pin stays, refused or not; the condition says why
	}
	pool := m.Spec.MachinePoolRef.Name
	r.queue.Refuse(m.UID, pool, c.Message, r.Now())
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	m.Spec.MachinePoolRef = nil
	delete(m.Annotations, computev1alpha1.AnnotationBoundBy)
	controllerutil.RemoveFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) // no pool, no runtime machine
	if err := r.Client.Patch(ctx, m, patch); err != nil {
		if apierrors.IsConflict(err) {
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Cache.Forget(m.UID)
	log.FromContext(ctx).Info("runtime refused the Machine; scheduling it again without that pool",
		"pool", pool, "backoff", r.RefusalBackoff)
	return ctrl.Result{}, nil
}

// wait leaves the Machine unbound until a change of the cluster (a class, a pool, the image
// rules) could place it, saying why in its Scheduled condition.
func (r *Reconciler) wait(ctx context.Context, m *computev1alpha1.Machine, reason, msg string) error {
	r.queue.SetPending(client.ObjectKeyFromObject(m), true)
	return r.setScheduled(ctx, m, metav1.ConditionFalse, reason, msg)
}

// setScheduled writes the Scheduled condition unless it already says the same.
func (r *Reconciler) setScheduled(ctx context.Context, m *computev1alpha1.Machine, status metav1.ConditionStatus, reason, msg string) error {
	c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
	if c != nil && c.Status == status && c.Reason == reason && c.Message == msg {
		return nil
	}
	// What a person looks for is the Machine turning unschedulable, or for another reason:
	// pools coming up one by one change the counts in the message, not the news.
	news := c == nil || c.Status != status || c.Reason != reason
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: computev1alpha1.ConditionScheduled, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation,
	})
	if m.Status.State == "" {
		m.Status.State = computev1alpha1.MachineStatePending
	}
	err := r.Client.Status().Patch(ctx, m, patch)
	if apierrors.IsConflict(err) {
		return nil // a newer version is on its way through the informer and will be reconciled
	}
	if err == nil && status == metav1.ConditionFalse && news && reason != computev1alpha1.ReasonWaitingForPools {
		r.Events.Warning(m, computev1alpha1.EventUnschedulable, "Schedule", "%s: %s", reason, msg)
	}
	return client.IgnoreNotFound(err)
}

// releaseUnbound lets a deleted Machine go when no pool holds it: the finalizer the
// scheduler adds at binding is the poollet's to remove, but an unbound Machine has no poollet.
func (r *Reconciler) releaseUnbound(ctx context.Context, m *computev1alpha1.Machine) error {
	if m.Spec.MachinePoolRef != nil || m.DeletionTimestamp.IsZero() ||
		!controllerutil.ContainsFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) {
		return nil
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
	if err := r.Client.Patch(ctx, m, patch); err != nil && !apierrors.IsConflict(err) {
		return client.IgnoreNotFound(err)
	}
	return nil
}
