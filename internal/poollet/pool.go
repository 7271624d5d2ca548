package poollet

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// PoolReconciler keeps the MachinePool's status current from the runtime.
type PoolReconciler struct {
	Pool       string
	ProviderID string
	Labels     map[string]string
	Client     client.Client
	Runtime    mriv1alpha1.MachineRuntimeClient
	// Interval is how often the runtime's capacity is read again: the runtime has no
	// watch for it, so this is an outside clock.
	Interval time.Duration
	// Orphans is counted on every read, and said in the status when it holds.
	Orphans *orphanGuard
	// Console is the poollet's console endpoint, shown in the status; nil: none.
	Console *computev1alpha1.PoolConsoleEndpoint

	mu    sync.RWMutex
	archs []computev1alpha1.ArchitectureExecution
}

// Architectures returns the pool's architectures, in the runtime's order of preference,
// and how it runs each, as last read from the runtime.
func (r *PoolReconciler) Architectures() []computev1alpha1.ArchitectureExecution {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.archs
}

// Reconcile creates the pool if needed and writes its status when it changed.
func (r *PoolReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	mp := &computev1alpha1.MachinePool{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.Pool}, mp)
	if apierrors.IsNotFound(err) {
		// Deleted under a running poollet: the pool still exists, so its object comes back.
		// Its creation is watched: the status follows then.
		return ctrl.Result{}, ensurePool(ctx, r.Client, r)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	classes := &computev1alpha1.MachineClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return ctrl.Result{}, err
	}
	want := r.observe(ctx, mp, classes.Items)
	if n, err := countOrphans(ctx, r.Client, r.Runtime); err == nil {
		r.Orphans.set(n)
	}
	// A list of its own: countOrphans must list the runtime before the Machines.
	machines := &computev1alpha1.MachineList{}
	if err := r.Client.List(ctx, machines); err != nil {
		return ctrl.Result{}, err
	}
	want.Allocated = allocated(r.Pool, machines.Items, classes.Items)
	r.Orphans.condition(&want, mp.Generation)
	if !equality.Semantic.DeepEqual(mp.Status, want) {
		patch := client.MergeFrom(mp.DeepCopy())
		mp.Status = want
		if err := r.Client.Status().Patch(ctx, mp, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return ctrl.Result{RequeueAfter: r.Interval}, nil
}

// observe reads the runtime and returns the pool status it implies; an unreachable runtime
// keeps the last known capacity and turns Ready false.
func (r *PoolReconciler) observe(ctx context.Context, mp *computev1alpha1.MachinePool, classes []computev1alpha1.MachineClass) computev1alpha1.MachinePoolStatus {
	st := *mp.Status.DeepCopy()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := r.Runtime.Status(cctx, &mriv1alpha1.StatusRequest{})
	if mri.IsWrongPool(err) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonWrongRuntime, Message: mri.MessageOf(err), ObservedGeneration: mp.Generation})
		return st
	}
	if err != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonRuntimeUnreachable, Message: "the runtime does not answer: " + err.Error(), ObservedGeneration: mp.Generation})
		return st
	}
	archs := make([]computev1alpha1.Architecture, 0, len(rs.GetArchitectures()))
	for _, a := range rs.GetArchitectures() {
		if arch := mri.ArchFromMRI(a); arch != "" {
			archs = append(archs, arch)
		}
	}
	st.Architectures = archs
	st.Execution = execution(archs, rs.GetNativeArchitectures(), rs.GetEmulationReasons())
	r.mu.Lock()
	r.archs = st.Execution
	r.mu.Unlock()
	st.Capacity = mri.ResourcesFromMRI(rs.GetCapacity())
	st.Allocatable = mri.ResourcesFromMRI(rs.GetAllocatable())
	st.SupportedClasses = supportedClasses(classes, archs, st.Allocatable, rs.GetSupportedClasses())
	st.Addresses = nil
	for _, a := range rs.GetAddresses() {
		st.Addresses = append(st.Addresses, computev1alpha1.MachineAddress{Type: a.GetType(), Address: a.GetAddress()})
	}
	st.Networks = networksFromMRI(rs.GetNetworks())
	st.Console = r.Console
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: computev1alpha1.ReasonRuntimeReachable, Message: "the runtime answers", ObservedGeneration: mp.Generation})
	return st
}

// allocated is what the pool's Machines hold of it by the scheduler's accounting
// (scheduler.Allocated), as the pool's status.allocated shows it.
func allocated(pool string, machines []computev1alpha1.Machine, classes []computev1alpha1.MachineClass) corev1.ResourceList {
	demand := make(map[string]scheduler.Resources, len(classes))
	for _, c := range classes {
		demand[c.Name] = scheduler.ResourcesFrom(c.Capabilities)
	}
	return scheduler.Allocated(pool, machines, demand).List()
}

// allocatedBatch is how long a change of the pool's Machines waits before the pool is
// looked at again: Machines bound in a burst then cost one status write (and one read of
// the runtime) per batch, not one each, and status.allocated lags by at most this much.
const allocatedBatch = time.Second

// wakeSoon enqueues key after a delay; events within it are folded into one (a
// delaying queue keeps one entry per key, at its earliest time).
func wakeSoon(key reconcile.Request, after time.Duration) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc:  func(_ context.Context, _ event.CreateEvent, q queue) { q.AddAfter(key, after) },
		UpdateFunc:  func(_ context.Context, _ event.UpdateEvent, q queue) { q.AddAfter(key, after) },
		DeleteFunc:  func(_ context.Context, _ event.DeleteEvent, q queue) { q.AddAfter(key, after) },
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q queue) { q.AddAfter(key, after) },
	}
}

// chargeChanged passes the Machine events that change what the pool's Machines hold
// (scheduler.Charge): a Machine bound to the pool, gone from it (deleted, or taken back
// by the scheduler), or gone Terminated.
func chargeChanged() predicate.TypedPredicate[client.Object] {
	holds := func(o client.Object) (pool, class string, ok bool) {
		if m, isMachine := o.(*computev1alpha1.Machine); isMachine {
			return scheduler.Charge(m)
		}
		return "", "", false
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { _, _, ok := holds(e.Object); return ok },
		DeleteFunc: func(e event.DeleteEvent) bool { _, _, ok := holds(e.Object); return ok },
		UpdateFunc: func(e event.UpdateEvent) bool {
			p1, c1, ok1 := holds(e.ObjectOld)
			p2, c2, ok2 := holds(e.ObjectNew)
			return p1 != p2 || c1 != c2 || ok1 != ok2
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// networksFromMRI is the pool's networks as the API shows them to tenants.
func networksFromMRI(in []*mriv1alpha1.PoolNetwork) []computev1alpha1.PoolNetwork {
	var out []computev1alpha1.PoolNetwork
	for _, n := range in {
		pn := computev1alpha1.PoolNetwork{Name: n.GetName(), NAT: n.GetNat(), Segment: n.GetSegment()}
		for _, f := range n.GetForwards() {
			pn.Forwards = append(pn.Forwards, computev1alpha1.NetworkForward{Guest: f.GetGuest(), Target: f.GetTarget()})
		}
		out = append(out, pn)
	}
	return out
}

// supportedClasses are the classes one machine of which fits the pool, on one of its
// architectures, and that the runtime allows (all, when it names none). Sorted by name.
func supportedClasses(classes []computev1alpha1.MachineClass, archs []computev1alpha1.Architecture,
	alloc corev1.ResourceList, allowed []string) []string {
	allow := map[string]bool{}
	for _, c := range allowed {
		allow[c] = true
	}
	var out []string
	for _, c := range classes {
		if len(allow) > 0 && !allow[c.Name] {
			continue
		}
		archOK := c.Architecture == ""
		for _, a := range archs {
			archOK = archOK || a == c.Architecture
		}
		if archOK && fits(c.Capabilities, alloc) {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func fits(demand, alloc corev1.ResourceList) bool {
	for name, q := range demand {
		have, ok := alloc[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// execution says, for each architecture, whether the runtime runs it natively; the rest
// are emulated, with the runtime's reason when it gives one.
func execution(archs []computev1alpha1.Architecture, native []mriv1alpha1.Architecture, reasons []*mriv1alpha1.EmulationReason) []computev1alpha1.ArchitectureExecution {
	out := make([]computev1alpha1.ArchitectureExecution, 0, len(archs))
	for _, a := range archs {
		e := computev1alpha1.ArchitectureExecution{Architecture: a, Execution: computev1alpha1.ExecutionEmulated}
		for _, n := range native {
			if mri.ArchFromMRI(n) == a {
				e.Execution = computev1alpha1.ExecutionNative
			}
		}
		for _, r := range reasons {
			if e.Execution == computev1alpha1.ExecutionEmulated && mri.ArchFromMRI(r.GetArchitecture()) == a {
				e.Reason = r.GetReason()
			}
		}
		out = append(out, e)
	}
	return out
}
