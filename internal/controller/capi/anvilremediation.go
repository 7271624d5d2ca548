package capi

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/anvilmachine"
	"github.com/anvil-dev/anvil/internal/capi/remediation"
	"github.com/anvil-dev/anvil/internal/events"
)

// AnvilRemediationReconciler carries out MachineHealthChecks' remediation requests: it
// reboots or power-cycles the anvil Machine, and gives up by setting the Cluster API
// Machine's OwnerRemediated condition to False, upon which its MachineSet replaces it.
type AnvilRemediationReconciler struct {
	Client client.Client
	// Computes says where each cluster's anvil Machines live.
	Computes *Computes
	Events   *events.Recorder
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilremediations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvilremediations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines/status,verbs=get;patch

// Reconcile makes the next try of one remediation, or gives up.
func (r *AnvilRemediationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rem := &infrav1.AnvilRemediation{}
	if ok, err := getOptional(ctx, r.Client, req.NamespacedName, rem); !ok {
		return ctrl.Result{}, err
	}
	// A MachineHealthCheck names the request after the Machine it remediates.
	machine := &clusterv1.Machine{}
	found, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: rem.Namespace, Name: rem.Name}, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	var cluster *clusterv1.Cluster
	var ac *infrav1.AnvilCluster
	if found {
		if cluster, ac, err = clusterOf(ctx, r.Client, rem.Namespace, machine.Spec.ClusterName); err != nil {
			return ctrl.Result{}, err
		}
	} else {
		machine = nil
	}
	base := rem.DeepCopy()
	isPaused := paused(cluster, rem)
	apimeta.SetStatusCondition(&rem.Status.Conditions, pausedCondition(isPaused, rem.Generation))
	if isPaused {
		return conflictOr(client.IgnoreNotFound(patchStatus(ctx, r.Client, rem, base)))
	}
	compute, err := r.Computes.For(ctx, ac)
	if err != nil {
		apimeta.SetStatusCondition(&rem.Status.Conditions, withGeneration(identityUnusable(err), rem.Generation))
		return ctrl.Result{RequeueAfter: recheckIdentity(err)}, client.IgnoreNotFound(patchStatus(ctx, r.Client, rem, base))
	}
	ctx, cancel := compute.bound(ctx)
	defer cancel()
	anvil, err := r.anvilMachine(ctx, compute, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	if rem.DeletionTimestamp != nil {
		return r.finish(ctx, compute, rem, anvil)
	}
	if controllerutil.AddFinalizer(rem, infrav1.FinalizerAnvilRemediation) {
		// Before the first try, so a remediation deleted mid power cycle powers the machine on.
		if err := r.Client.Update(ctx, rem); err != nil {
			return conflictOr(err)
		}
		base = rem.DeepCopy()
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	plan := remediation.Decide(remediation.Input{Remediation: rem, Machine: anvil, Now: now()})
	if err := r.apply(ctx, compute, rem, plan, machine, anvil); err != nil {
		return conflictOr(err)
	}
	conditions := rem.Status.Conditions
	rem.Status = plan.Status
	rem.Status.Conditions = conditions
	apimeta.SetStatusCondition(&rem.Status.Conditions, withGeneration(plan.Ready, rem.Generation))
	if err := patchStatus(ctx, r.Client, rem, base); err != nil {
		return conflictOr(client.IgnoreNotFound(err))
	}
	return ctrl.Result{RequeueAfter: plan.After}, nil
}

// anvilMachine is the anvil Machine of a Cluster API Machine, through its AnvilMachine's
// providerID; nil if any of them is gone, or is not the provider's: remediation reboots and
// power-cycles only an anvil Machine the provider made for an AnvilMachine that Machine owns
// (a hand-made Machine naming another's AnvilMachine, or an anvil Machine of the same name
// made by someone else, is left alone).
func (r *AnvilRemediationReconciler) anvilMachine(ctx context.Context, compute Compute, machine *clusterv1.Machine) (*computev1alpha1.Machine, error) {
	if machine == nil || machine.Spec.InfrastructureRef.Kind != "AnvilMachine" || machine.Spec.InfrastructureRef.APIGroup != infrav1.GroupVersion.Group {
		return nil, nil
	}
	am := &infrav1.AnvilMachine{}
	if ok, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: machine.Namespace, Name: machine.Spec.InfrastructureRef.Name}, am); !ok || am.Spec.ProviderID == "" {
		return nil, err
	}
	if ownerName(am, "Machine") != machine.Name {
		return nil, nil
	}
	m, err := anvilMachineOf(ctx, compute, am, compute.namespaceFor(am.Namespace))
	if err != nil || m == nil || !anvilmachine.Ours(m, am) {
		return nil, err
	}
	return m, nil
}

// apply makes the plan's try on the anvil Machine, then gives up on the Cluster API Machine.
func (r *AnvilRemediationReconciler) apply(ctx context.Context, compute Compute, rem *infrav1.AnvilRemediation, p remediation.Plan, machine *clusterv1.Machine, anvil *computev1alpha1.Machine) error {
	if anvil != nil && (p.Reboot != "" && anvil.Annotations[computev1alpha1.AnnotationReboot] != p.Reboot || p.Power != "" && anvil.Spec.Power != p.Power) {
		want := anvil.DeepCopy()
		if p.Reboot != "" {
			metav1.SetMetaDataAnnotation(&want.ObjectMeta, computev1alpha1.AnnotationReboot, p.Reboot)
			r.Events.Normal(rem, "Rebooting", "Remediate", "try %d: rebooting anvil Machine %s/%s", p.Status.Tries, anvil.Namespace, anvil.Name)
		}
		if p.Power != "" {
			want.Spec.Power = p.Power
			r.Events.Normal(rem, "Power"+string(p.Power), "Remediate", "try %d: powering anvil Machine %s/%s %s", p.Status.Tries, anvil.Namespace, anvil.Name, p.Power)
		}
		if err := compute.Client.Patch(ctx, want, client.MergeFromWithOptions(anvil, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	if !p.GiveUp || machine == nil {
		return nil
	}
	c := apimeta.FindStatusCondition(machine.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
	if c != nil && c.Status == metav1.ConditionFalse && c.Message == p.Ready.Message {
		return nil
	}
	base := machine.DeepCopy()
	apimeta.SetStatusCondition(&machine.Status.Conditions, metav1.Condition{
		Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
		Reason:  clusterv1.MachineOwnerRemediatedWaitingForRemediationReason,
		Message: p.Ready.Message, ObservedGeneration: machine.Generation,
	})
	if err := r.Client.Status().Patch(ctx, machine, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("asking Cluster API to replace Machine %s: %w", machine.Name, err)
	}
	r.Events.Warning(rem, "GaveUp", "Remediate", "%s", p.Ready.Message)
	return nil
}

// finish lets a deleted remediation go; a machine it powered off is powered on first.
func (r *AnvilRemediationReconciler) finish(ctx context.Context, compute Compute, rem *infrav1.AnvilRemediation, anvil *computev1alpha1.Machine) (ctrl.Result, error) {
	cycling := rem.Status.Phase == infrav1.RemediationPhaseWaitingForPowerOff || rem.Status.Phase == infrav1.RemediationPhaseRunning
	if anvil != nil && cycling && anvil.Spec.Power == computev1alpha1.PowerOff {
		want := anvil.DeepCopy()
		want.Spec.Power = computev1alpha1.PowerOn
		if err := compute.Client.Patch(ctx, want, client.MergeFromWithOptions(anvil, client.MergeFromWithOptimisticLock{})); err != nil {
			return conflictOr(err)
		}
	}
	if controllerutil.RemoveFinalizer(rem, infrav1.FinalizerAnvilRemediation) {
		return conflictOr(client.IgnoreNotFound(r.Client.Update(ctx, rem)))
	}
	return ctrl.Result{}, nil
}
