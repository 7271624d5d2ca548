package poollet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet/machineplan"
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
	// ServesConsoles says the poollet has a console endpoint (the ConsoleAvailable condition).
	ServesConsoles bool

	// lagging holds, per runtime machine id, what the plan remembers of its lag
	// (machineplan.Lag).
	lagging sync.Map
	// written holds, per Machine UID, the resource version our last status write produced.
	written sync.Map
	// unread holds, per Machine, since when its first-boot Secret could not be read.
	unread unreadSecrets
}

// Reconcile makes the runtime hold exactly one machine for the Machine, shaped like its
// spec, and writes back what the runtime reports: it observes, and carries out what
// machineplan decides, one action at a time, until the plan ends the pass.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &computev1alpha1.Machine{}
	err := r.Client.Get(ctx, req.NamespacedName, m)
	if apierrors.IsNotFound(err) {
		return r.gone(ctx, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if m.Spec.MachinePoolRef == nil || m.Spec.MachinePoolRef.Name != r.Pool {
		return ctrl.Result{}, nil
	}
	listed, err := r.sorted(ctx, req.NamespacedName, m.UID)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := &machineplan.Pass{Pool: r.Pool, ServesConsoles: r.ServesConsoles, Machine: m, Runtime: listed.Mine, Garbage: listed.Delete, StuckAfter: r.StuckAfter}
	lagID := listed.Mine.GetMetadata().GetId()
	if v, ok := r.lagging.Load(lagID); ok && lagID != "" {
		p.Lag = v.(machineplan.Lag)
	}
	p.SecretUnreadSince = r.unread.sinceOf(m)
	for {
		p.Now = time.Now()
		a := p.Next()
		res, err := r.execute(ctx, p, a)
		if err != nil || a.Ends() {
			if lagID != "" && m.DeletionTimestamp.IsZero() {
				r.remember(lagID, p.Lag)
			}
			return res, err
		}
	}
}

// gone deletes the runtime machines of a Machine the cache no longer holds. The cache
// holds only this pool's Machines, and may lag: deleting what it does not hold needs the
// API server's word that the Machine is gone or bound elsewhere.
func (r *MachineReconciler) gone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	r.unread.forget(key)
	m := &computev1alpha1.Machine{}
	if err := r.Reader.Get(ctx, key, m); err == nil && m.Spec.MachinePoolRef != nil && m.Spec.MachinePoolRef.Name == r.Pool {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	s, err := r.sorted(ctx, key, "") // all of it is garbage now
	if err == nil {
		err = r.deleteRuntimeMachines(ctx, s.Delete)
	}
	if held, _ := r.Orphans.holds(); held && err == nil {
		return ctrl.Result{RequeueAfter: r.StuckAfter}, nil // look again once they may go
	}
	return ctrl.Result{}, err
}

// sorted lists what the runtime holds under the Machine key and sorts it for the Machine
// of the given uid ("": for none).
func (r *MachineReconciler) sorted(ctx context.Context, key types.NamespacedName, uid types.UID) (machineplan.Sorted, error) {
	list, err := r.Runtime.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{
		LabelMachineNamespace: key.Namespace, LabelMachineName: key.Name}})
	if err != nil {
		return machineplan.Sorted{}, fmt.Errorf("listing runtime machines: %w", err)
	}
	held, orphans := r.Orphans.holds()
	s := machineplan.Sort(list.GetMachines(), uid, held)
	for _, id := range s.Kept {
		log.FromContext(ctx).Info("keeping a runtime machine without a Machine: too many orphans to delete on its own",
			"id", id, "orphans", orphans, "limit", r.Orphans.limit)
	}
	if s.Duplicates > 0 {
		log.FromContext(ctx).Info("deleting duplicate runtime machines", "kept", s.Mine.GetMetadata().GetId(), "duplicates", s.Duplicates)
	}
	return s, nil
}

func (r *MachineReconciler) deleteRuntimeMachines(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := r.Runtime.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil && !mri.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// remember keeps what the plan says to remember of a runtime machine's lag.
func (r *MachineReconciler) remember(id string, lag machineplan.Lag) {
	if lag.Since.IsZero() {
		r.lagging.Delete(id)
		return
	}
	r.lagging.Store(id, lag)
}

// execute carries out one action of the pass and records its outcome on p. The result
// and error are the reconcile's when the action ends the pass or fails.
func (r *MachineReconciler) execute(ctx context.Context, p *machineplan.Pass, a machineplan.Action) (ctrl.Result, error) {
	m := p.Machine
	switch a.Kind {
	case machineplan.DeleteGarbage:
		return ctrl.Result{}, r.deleteRuntimeMachines(ctx, a.IDs)
	case machineplan.AddFinalizer:
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
		return ctrl.Result{}, r.Client.Patch(ctx, m, patch)
	case machineplan.Create:
		return ctrl.Result{}, r.create(ctx, p)
	case machineplan.Reimage:
		return ctrl.Result{}, r.reimage(ctx, p)
	case machineplan.CheckFirstBoot:
		boot, cond, err := r.firstBoot(ctx, p)
		if cond != nil {
			p.Problem(*cond)
		} else if err == nil {
			p.FirstBoot(boot)
		}
		return ctrl.Result{}, err
	case machineplan.SetPower:
		resp, err := r.Runtime.UpdateMachinePower(ctx, &mriv1alpha1.UpdateMachinePowerRequest{Id: p.Runtime.GetMetadata().GetId(), Power: a.Power})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("setting power: %w", err)
		}
		p.Answered(resp.GetMachine())
	case machineplan.Reboot:
		resp, err := r.Runtime.RebootMachine(ctx, &mriv1alpha1.RebootMachineRequest{Id: p.Runtime.GetMetadata().GetId(), Token: a.Token})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("rebooting: %w", err)
		}
		p.Answered(resp.GetMachine())
	case machineplan.DeleteRuntime:
		if _, err := r.Runtime.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: p.Runtime.GetMetadata().GetId()}); err != nil && !mri.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		still, err := r.sorted(ctx, client.ObjectKeyFromObject(m), m.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		p.Deleted(still)
	case machineplan.MarkTerminating:
		patch := client.MergeFrom(m.DeepCopy())
		m.Status = *a.Status
		return ctrl.Result{RequeueAfter: a.After}, client.IgnoreNotFound(r.Client.Status().Patch(ctx, m, patch))
	case machineplan.RemoveFinalizer:
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.RemoveFinalizer(m, computev1alpha1.FinalizerRuntimeMachine)
		r.written.Delete(m.UID)
		r.unread.forget(client.ObjectKeyFromObject(m))
		if p.Runtime != nil {
			r.lagging.Delete(p.Runtime.GetMetadata().GetId())
		}
		if err := r.Client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.emit(m, a.Events)
	case machineplan.WriteStatus:
		res := ctrl.Result{RequeueAfter: a.After}
		err := r.writeStatus(ctx, m, *a.Status)
		switch {
		case errors.Is(err, errRetry) && a.StaleIsFine:
			return res, nil
		case errors.Is(err, errRetry):
			return requeue.AfterConflict(), nil
		case err != nil:
			return res, err
		}
		r.emit(m, a.Events)
		return res, nil
	case machineplan.Wait:
		return ctrl.Result{RequeueAfter: a.After}, nil
	default:
		return ctrl.Result{}, fmt.Errorf("the plan asked for an unknown action %d", a.Kind)
	}
	return ctrl.Result{}, nil
}

// emit records the plan's Events on the Machine.
func (r *MachineReconciler) emit(m *computev1alpha1.Machine, evs []machineplan.Event) {
	for _, e := range evs {
		if e.Warning {
			r.Events.Warning(m, e.Reason, e.Action, "%s", e.Message)
		} else {
			r.Events.Normal(m, e.Reason, e.Action, "%s", e.Message)
		}
	}
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
