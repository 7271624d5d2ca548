package loadbalancer

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
)

// segmentRetry is how soon a segment listener that could not be made is tried again.
const segmentRetry = time.Second

// Segment is a segment network of the pools this process serves.
type Segment struct {
	Subnet  netip.Prefix
	Gateway netip.Addr
	// Name is the switch's name of a namespace's segment of the network.
	Name func(namespace string) string
}

// Reconciler serves every LoadBalancer on a segment network of Segments: it gives a new one
// a port of Ports, listens, and keeps its backends to the selected running machines. What it
// serves lives in this process only, so a restart serves every LoadBalancer again from its
// status (the port it was given) as the controller lists them.
type Reconciler struct {
	Client   client.Client
	Server   *Server
	Segments map[string]Segment // by network name
	Ports    Ports
	Events   *events.Recorder
}

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=loadbalancers,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=loadbalancers/status,verbs=get;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch

// Reconcile serves one LoadBalancer as its spec says and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.String()
	lb := &computev1alpha1.LoadBalancer{}
	if err := r.Client.Get(ctx, req.NamespacedName, lb); err != nil {
		if apierrors.IsNotFound(err) {
			r.Server.Stop(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lb.DeletionTimestamp != nil {
		r.Server.Stop(key)
		return ctrl.Result{}, nil
	}
	var retry time.Duration
	seg, ok := r.Segments[lb.Spec.Network]
	o := Observed{Segment: ok, Host: r.Server.host, Gateway: seg.Gateway}
	if !ok {
		r.Server.Stop(key)
	} else {
		machines := &computev1alpha1.MachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(lb.Namespace), client.MatchingLabels(lb.Spec.Selector)); err != nil {
			return ctrl.Result{}, err
		}
		o.Backends = Backends(machines.Items, seg.Subnet, uint16(lb.Spec.Port))
		serving, err := r.serve(ctx, key, seg.Name(lb.Namespace), lb, o.Backends)
		o.Port, o.SegmentOpen, o.ListenErr = serving.Port, serving.SegmentOpen, err
		if serving.SegmentErr != nil {
			// The segment is open and its listener could not be made (the old one of a
			// restarted server still closing, say): no event will come for it.
			retry = segmentRetry
		}
	}
	st := Status(lb, o)
	if equality.Semantic.DeepEqual(st, lb.Status) {
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	base := lb.DeepCopy()
	first := lb.Status.Endpoint == nil && st.Endpoint != nil
	lb.Status = st
	if err := r.Client.Status().Patch(ctx, lb, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if first {
		r.Events.Normal(lb, "Listening", "Serve", "listening at %s:%d on the host and %s:%d on the segment",
			st.Endpoint.Host, st.Endpoint.Port, st.SegmentEndpoint.Host, st.SegmentEndpoint.Port)
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

// serve listens for lb: at the port its status records, or, for a new one, at the lowest
// port of the range no other load balancer has (in any status, or served here), skipping
// ports another process holds.
func (r *Reconciler) serve(ctx context.Context, key, segment string, lb *computev1alpha1.LoadBalancer, backends []netip.AddrPort) (Serving, error) {
	if e := lb.Status.Endpoint; e != nil {
		return r.Server.Serve(key, segment, uint16(e.Port), backends)
	}
	used := r.Server.Ports()
	all := &computev1alpha1.LoadBalancerList{}
	if err := r.Client.List(ctx, all); err != nil {
		return Serving{}, err
	}
	for _, other := range all.Items {
		if e := other.Status.Endpoint; e != nil && other.UID != lb.UID {
			used[uint16(e.Port)] = true
		}
	}
	var lastErr error = fmt.Errorf("every port of %d-%d is taken by another load balancer", r.Ports.First, r.Ports.Last)
	for _, p := range r.Ports.Candidates(used) {
		s, err := r.Server.Serve(key, segment, p, backends)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return Serving{}, lastErr
}

// SetupWithManager runs the controller. One LoadBalancer at a time: a new one's port is
// chosen against the others'. Any change of a namespace's Machines reconciles its
// LoadBalancers: backends come and go, and a segment opens with its first machine.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("loadbalancer").
		For(&computev1alpha1.LoadBalancer{}).
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			lbs := &computev1alpha1.LoadBalancerList{}
			if err := r.Client.List(ctx, lbs, client.InNamespace(o.GetNamespace())); err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(lbs.Items))
			for _, lb := range lbs.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&lb)})
			}
			return out
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}
