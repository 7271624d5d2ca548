package scheduler

import (
	"context"
	"reflect"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// The handlers below keep the Cache current as events arrive, and retry the pending
// (unschedulable) Machines only when a change could make one of them fit.

func (r *Reconciler) wakePending(q requestQueue) {
	for _, key := range r.queue.Pending() {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// machineHandler charges bound Machines, frees deleted and Terminated ones, and queues
// the Machines that need a decision.
func (r *Reconciler) machineHandler() handler.EventHandler {
	observe := func(o client.Object, q requestQueue) {
		m, ok := o.(*computev1alpha1.Machine)
		if !ok {
			return
		}
		if m.Status.State == computev1alpha1.MachineStateTerminated {
			r.release(m, q) // it holds nothing (scheduler.Charge) and needs no decision
			return
		}
		if pool, class, charged := scheduler.Charge(m); charged {
			r.Cache.Observe(m.UID, pool, class)
			if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); c == nil || c.Status != metav1.ConditionFalse {
				return // bound and nothing to say about it
			}
		}
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { observe(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) { observe(e.ObjectNew, q) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q requestQueue) {
			if m, ok := e.Object.(*computev1alpha1.Machine); ok {
				r.release(m, q)
				r.queue.Forget(client.ObjectKeyFromObject(m), m.UID)
			}
		},
	}
}

// release frees what a Machine held; a freed pool may now fit a pending Machine.
func (r *Reconciler) release(m *computev1alpha1.Machine, q requestQueue) {
	if _, charged := r.Cache.ChargedPool(m.UID); charged {
		r.Cache.Forget(m.UID)
		r.wakePending(q)
	}
}

func (r *Reconciler) poolHandler() handler.EventHandler {
	set := func(o client.Object, q requestQueue) {
		if mp, ok := o.(*computev1alpha1.MachinePool); ok {
			r.Cache.SetPool(poolFrom(mp, r.Cache.ClassIndex))
			r.wakePending(q)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { set(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) {
			oldPool, okOld := e.ObjectOld.(*computev1alpha1.MachinePool)
			newPool, okNew := e.ObjectNew.(*computev1alpha1.MachinePool)
			if okOld && okNew && !schedulingRelevantChange(oldPool, newPool) {
				return
			}
			// What the pool offers changed: the Machines its runtime refused may fit now.
			r.queue.PoolChanged(e.ObjectNew.GetName())
			set(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ requestQueue) { r.Cache.RemovePool(e.Object.GetName()) },
	}
}

// schedulingRelevantChange ignores what a decision never reads (addresses, capacity,
// condition timestamps), so routine status writes do not wake every pending Machine.
func schedulingRelevantChange(a, b *computev1alpha1.MachinePool) bool {
	ready := func(mp *computev1alpha1.MachinePool) bool {
		return meta.IsStatusConditionTrue(mp.Status.Conditions, computev1alpha1.ConditionReady)
	}
	return ready(a) != ready(b) ||
		!reflect.DeepEqual(a.Labels, b.Labels) ||
		!reflect.DeepEqual(a.Spec, b.Spec) ||
		!reflect.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!reflect.DeepEqual(a.Status.Architectures, b.Status.Architectures) ||
		!reflect.DeepEqual(a.Status.Execution, b.Status.Execution) ||
		!reflect.DeepEqual(a.Status.SupportedClasses, b.Status.SupportedClasses)
}

// leaseHandler records pool heartbeats. A renewal of a live Lease changes no decision,
// so only a Lease that comes back from expiry wakes pending Machines.
func (r *Reconciler) leaseHandler() handler.EventHandler {
	set := func(o client.Object, q requestQueue) {
		l, ok := o.(*coordinationv1.Lease)
		if !ok || l.Namespace != computev1alpha1.PoolLeaseNamespace {
			return
		}
		prev, known := r.Cache.Pool(l.Name)
		r.Cache.SetHeartbeat(l.Name, leaseExpiry(l))
		if known && !r.Now().Before(prev.HeartbeatExpiry) {
			r.wakePending(q)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { set(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) { set(e.ObjectNew, q) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ requestQueue) {
			if e.Object.GetNamespace() == computev1alpha1.PoolLeaseNamespace {
				r.Cache.RemoveHeartbeat(e.Object.GetName())
			}
		},
	}
}

func (r *Reconciler) classHandler() handler.EventHandler {
	set := func(o client.Object, q requestQueue) {
		if mc, ok := o.(*computev1alpha1.MachineClass); ok {
			r.Cache.SetClass(mc.Name, schedulerResources(mc), classArchitectures(mc))
			r.wakePending(q)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { set(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) { set(e.ObjectNew, q) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ requestQueue) { r.Cache.RemoveClass(e.Object.GetName()) },
	}
}

// namespaceHandler retries pending Machines when a namespace's labels change, since
// tenant policies select namespaces by label.
func (r *Reconciler) namespaceHandler() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) {
			a, okA := e.ObjectOld.(*corev1.Namespace)
			b, okB := e.ObjectNew.(*corev1.Namespace)
			if okA && okB && !reflect.DeepEqual(a.Labels, b.Labels) {
				r.wakePending(q)
			}
		},
	}
}
