package poollet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/mri"
)

// MachineReconciler drives the runtime machines of one pool's Machines.
type MachineReconciler struct {
	Pool    string
	Client  client.Client
	Reader  client.Reader // uncached: Secrets are read one by one, never listed
	Runtime mriv1alpha1.MachineRuntimeClient
	Images  ImageResolver
	// ImageFolders: see Options.
	ImageFolders []imageowner.Folders
	// Architectures the pool runs, in its order of preference, and how; set from the runtime.
	Architectures func() []computev1alpha1.ArchitectureExecution
	// StuckAfter is how long a runtime step may lag before the call is repeated (a
	// runtime may lose a step; every MRI call is idempotent).
	StuckAfter time.Duration
	// Orphans says when runtime machines without a Machine may be deleted.
	Orphans *orphanGuard
	// Events are the Events a person looks for on a Machine (Reimaging, Reimaged).
	Events *events.Recorder

	// lagging holds, per runtime machine id, when it was first seen behind its spec.
	lagging sync.Map
	// written holds, per Machine UID, the resource version our last status write produced.
	written sync.Map
	// unread holds, per Machine, since when its first-boot Secret could not be read.
	unread unreadSecrets
}

// Reconcile makes the runtime hold exactly one machine for the Machine, shaped like its
// spec, and writes back what the runtime reports.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &computev1alpha1.Machine{}
	err := r.Client.Get(ctx, req.NamespacedName, m)
	if apierrors.IsNotFound(err) {
		r.unread.forget(req.NamespacedName)
		// The cache holds only this pool's Machines, and may lag: deleting what it does not
		// hold needs the API server's word that the Machine is gone or bound elsewhere.
		if err := r.Reader.Get(ctx, req.NamespacedName, m); err == nil && m.Spec.MachinePoolRef != nil && m.Spec.MachinePoolRef.Name == r.Pool {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		} else if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		_, err := r.runtimeMachine(ctx, req.NamespacedName, "") // all of it is garbage now
		if held, _ := r.Orphans.holds(); held && err == nil {
			return ctrl.Result{RequeueAfter: r.StuckAfter}, nil // look again once they may go
		}
		return ctrl.Result{}, err
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if m.Spec.MachinePoolRef == nil || m.Spec.MachinePoolRef.Name != r.Pool {
		return ctrl.Result{}, nil
	}
	rm, err := r.runtimeMachine(ctx, req.NamespacedName, m.UID)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.delete(ctx, m, rm)
	}
	if !controllerutil.ContainsFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) {
		// A Machine pinned by its user: the scheduler never added the finalizer.
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
		if err := r.Client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	if rm == nil {
		return r.create(ctx, m)
	}
	return r.update(ctx, m, rm)
}

// runtimeMachine returns the one runtime machine of the Machine key with the given uid,
// and deletes what else carries the Machine's name: machines of an earlier Machine of
// that name (or, with uid "", of a Machine that is gone), and duplicates of this one. Of
// duplicates the oldest is kept, since it is the one a user may already be using.
func (r *MachineReconciler) runtimeMachine(ctx context.Context, key types.NamespacedName, uid types.UID) (*mriv1alpha1.Machine, error) {
	list, err := r.Runtime.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{
		LabelMachineNamespace: key.Namespace, LabelMachineName: key.Name}})
	if err != nil {
		return nil, fmt.Errorf("listing runtime machines: %w", err)
	}
	var mine, garbage []*mriv1alpha1.Machine
	held, orphans := r.Orphans.holds()
	for _, rm := range list.GetMachines() {
		switch {
		case uid != "" && rm.GetMetadata().GetLabels()[mri.LabelMachineUID] == string(uid):
			mine = append(mine, rm)
		case held:
			log.FromContext(ctx).Info("keeping a runtime machine without a Machine: too many orphans to delete on its own",
				"id", rm.GetMetadata().GetId(), "orphans", orphans, "limit", r.Orphans.limit)
		default:
			garbage = append(garbage, rm)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		a, b := mine[i].GetMetadata(), mine[j].GetMetadata()
		if a.GetCreatedAtUnixNano() != b.GetCreatedAtUnixNano() {
			return a.GetCreatedAtUnixNano() < b.GetCreatedAtUnixNano()
		}
		return a.GetId() < b.GetId()
	})
	if len(mine) > 1 {
		log.FromContext(ctx).Info("deleting duplicate runtime machines", "kept", mine[0].GetMetadata().GetId(), "duplicates", len(mine)-1)
		garbage = append(garbage, mine[1:]...)
	}
	for _, g := range garbage {
		if g.GetMetadata().GetDeletedAtUnixNano() != 0 {
			continue
		}
		if _, err := r.Runtime.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: g.GetMetadata().GetId()}); err != nil && !mri.IsNotFound(err) {
			return nil, err
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	return mine[0], nil
}

// delete removes the runtime machine, and the finalizer once the runtime says it is gone.
// Terminating is written only while the runtime is still at it: a runtime that deletes at
// once costs the Machine no extra write.
func (r *MachineReconciler) delete(ctx context.Context, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) (ctrl.Result, error) {
	if rm != nil {
		if _, err := r.Runtime.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: rm.GetMetadata().GetId()}); err != nil && !mri.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		still, err := r.runtimeMachine(ctx, client.ObjectKeyFromObject(m), m.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		if still != nil {
			// The runtime's DELETED event brings us back; until then the finalizer holds. A
			// machine that goes while the event stream is down (the runtime restarting) sends
			// none, and a reopened stream lists only what is left: look again after
			// StuckAfter.
			wait := ctrl.Result{RequeueAfter: r.StuckAfter}
			if m.Status.State == computev1alpha1.MachineStateTerminating {
				return wait, nil
			}
			patch := client.MergeFrom(m.DeepCopy())
			m.Status.State = computev1alpha1.MachineStateTerminating
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReady,
				Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonTerminating, Message: "the runtime is deleting the machine"})
			return wait, client.IgnoreNotFound(r.Client.Status().Patch(ctx, m, patch))
		}
	}
	if !controllerutil.ContainsFinalizer(m, computev1alpha1.FinalizerRuntimeMachine) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
	r.written.Delete(m.UID)
	r.unread.forget(client.ObjectKeyFromObject(m))
	if err := r.Client.Patch(ctx, m, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rm != nil || m.Status.MachineID != "" {
		r.Events.Normal(m, computev1alpha1.EventDeleted, "Delete", "the runtime machine is gone from MachinePool %s", r.Pool)
	}
	return ctrl.Result{}, nil
}

// writeStatus patches status when it differs from what is stored. A reconcile that runs
// on a cached copy older than our own last write does not write: patching the stale copy
// would only be refused as a conflict, at the full cost of an update to the apiserver. It
// returns errRetry instead, because the informer delivering that write wakes nobody (the
// Machine watch ignores status-only changes): a runtime change seen on the stale copy, such
// as a guest's power-off right after its start was reported, would otherwise be dropped.
// (Resource versions are compared as the etcd revisions they are; one that is not a number
// turns the shortcut off.)
func (r *MachineReconciler) writeStatus(ctx context.Context, m *computev1alpha1.Machine, st computev1alpha1.MachineStatus) error {
	if equality.Semantic.DeepEqual(m.Status, st) {
		return nil
	}
	if last, ok := r.written.Load(m.UID); ok {
		if cached, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil && cached < last.(uint64) {
			return errRetry
		}
	}
	// An update, not a patch: the resource version makes it just as safe, and the
	// apiserver skips applying a merge patch to the stored object, the largest part of
	// the cost of a status write.
	m = m.DeepCopy()
	m.Status = st
	err := r.Client.Status().Update(ctx, m)
	if apierrors.IsConflict(err) {
		return errRetry
	}
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil {
		r.written.Store(m.UID, rv)
	}
	return nil
}

// errRetry asks for another pass without counting as a failure.
var errRetry = errors.New("stale object; retrying")

// condition sets one condition in a copy of m's status and writes it.
func (r *MachineReconciler) condition(ctx context.Context, m *computev1alpha1.Machine, c metav1.Condition) error {
	st := *m.Status.DeepCopy()
	c.ObservedGeneration = m.Generation
	meta.SetStatusCondition(&st.Conditions, c)
	if st.State == "" {
		st.State = computev1alpha1.MachineStatePending
	}
	return r.writeStatus(ctx, m, st)
}
