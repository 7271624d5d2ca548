package host

import (
	"context"
	"github.com/anvil-dev/anvil/internal/events"
	corev1 "k8s.io/api/core/v1"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/controller/host/imagecheck"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Reconciler drives Hosts through the provisioner.
type Reconciler struct {
	Client      client.Client
	Provisioner provisioner.Provisioner
	Images      *imagecheck.Checker
	// BusyPoll is how soon a Host whose server is busy is looked at again (default 2 s).
	BusyPoll time.Duration
	// Resync is how often a Host at rest is checked against the provisioner (default 60 s).
	Resync time.Duration
	// MaxBackoff caps the wait after repeated failures, a power change's included
	// (default 60 s).
	MaxBackoff time.Duration
	// Eraser is the image, per architecture, that erases a released server's disks before
	// its Host is Available again (the site's eraser). Empty: the controller wipes nothing
	// (Ironic's own cleaning does, or nothing does). Fake hardware is never wiped.
	Eraser map[computev1alpha1.Architecture]provisioner.Image
	// WipeTimeout is how long the eraser may run before the wipe counts as failed
	// (default 30 minutes).
	WipeTimeout time.Duration
	// Events are the Events a person looks for on a Host (Registered, Provisioned, Wiped…).
	Events *events.Recorder
	// Clock is the reconciles' time: the back-offs' and the wipe's clock (nil: the real one).
	Clock    clock.PassiveClock
	rechecks rechecks
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// eraserFor is the eraser for h, or nil when h is not wiped by the controller. A Host of
// an architecture the site has no eraser for gets an empty image: the planner fails its
// wipe, so it is not handed out again unwiped.
func (r *Reconciler) eraserFor(h *metalv1alpha1.Host) *provisioner.Image {
	if len(r.Eraser) == 0 || strings.HasPrefix(h.Spec.BMC.Address, "fake://") {
		return nil
	}
	img := r.Eraser[h.Spec.Architecture]
	return &img
}

// Hosts are the site's own namespace's only (a Role there; see internal/runtime/metal's
// rbac.go): a site's credentials cannot take over another site's servers.
//
// +kubebuilder:rbac:groups=metal.anvil.dev,namespace=anvil-metal,resources=hosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.anvil.dev,namespace=anvil-metal,resources=hosts/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hardwaredata,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=anvil-metal,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=anvil-metal,resources=events,verbs=create;patch

// nodeName is the provisioner's name for h.
func nodeName(h *metalv1alpha1.Host) string {
	return provisioner.NodeName(client.ObjectKeyFromObject(h))
}

// Reconcile does the next step for one Host.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	h := &metalv1alpha1.Host{}
	if err := r.Client.Get(ctx, req.NamespacedName, h); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if h.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(h, metalv1alpha1.FinalizerHost) {
		// Before the provisioner hears of the Host, so it is never forgotten by anvil
		// while the provisioner still holds it.
		// The update is not watched (the predicate ignores finalizers): carry on.
		controllerutil.AddFinalizer(h, metalv1alpha1.FinalizerHost)
		if err := r.Client.Update(ctx, h); err != nil {
			if apierrors.IsConflict(err) {
				return requeue.AfterConflict(), nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	s := &step{r: r, host: h, before: *h.Status.DeepCopy(), now: r.now()}
	if err := s.run(ctx); err != nil {
		if apierrors.IsConflict(err) {
			// The Host changed under a write of its deployment record: decide again on it.
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, err
	}
	if s.finalized {
		return ctrl.Result{}, nil
	}
	if err := r.patchStatus(ctx, h, &s.before); err != nil {
		if apierrors.IsConflict(err) {
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for _, e := range statusEvents(&s.before, &h.Status) {
		if e.typ == corev1.EventTypeWarning {
			r.Events.Warning(h, e.reason, e.action, "%s", e.note)
		} else {
			r.Events.Normal(h, e.reason, e.action, "%s", e.note)
		}
	}
	return ctrl.Result{RequeueAfter: r.after(s.plan, h.Status.ErrorCount)}, nil
}

// after is when to look again: when the plan says (a power change's back-off), soon while
// busy, backing off while failing.
func (r *Reconciler) after(p hostplan.Plan, errorCount int32) time.Duration {
	switch {
	case p.RetryAfter > 0:
		return p.RetryAfter
	case p.Failed:
		return hostplan.Backoff(errorCount, time.Second, orDefault(r.MaxBackoff, hostplan.DefaultMaxBackoff))
	case p.Busy:
		return orDefault(r.BusyPoll, 2*time.Second)
	}
	return orDefault(r.Resync, 60*time.Second)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
