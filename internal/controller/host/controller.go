package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/hostplan"
	"github.com/anvil-dev/anvil/internal/metal/imagecheck"
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
	// MaxBackoff caps the wait after repeated failures (default 60 s).
	MaxBackoff time.Duration
	// Triggers, when set, makes every Host it names be reconciled at once.
	Triggers <-chan event.GenericEvent
}

// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hosts/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hardwaredata,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// NodeName is the provisioner's name for a Host: unique across namespaces, and made of
// characters Ironic accepts in names.
func NodeName(h *metalv1alpha1.Host) string { return h.Namespace + "~" + h.Name }

// HostKey is the Host a provisioner node name belongs to; false for a name NodeName never
// makes.
func HostKey(node string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(node, "~")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
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
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	s := &step{r: r, host: h, before: *h.Status.DeepCopy()}
	if err := s.run(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if s.finalized {
		return ctrl.Result{}, nil
	}
	if err := r.patchStatus(ctx, h, &s.before); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: r.after(s.plan, h.Status.ErrorCount)}, nil
}

// after is when to look again: soon while busy, backing off while failing.
func (r *Reconciler) after(p hostplan.Plan, errorCount int32) time.Duration {
	switch {
	case p.Failed:
		d := time.Second << min(max(errorCount-1, 0), 10)
		return min(d, orDefault(r.MaxBackoff, 60*time.Second))
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

// step is one reconcile of one Host.
type step struct {
	r         *Reconciler
	host      *metalv1alpha1.Host
	before    metalv1alpha1.HostStatus
	node      *provisioner.Node
	plan      hostplan.Plan
	finalized bool
	// What this reconcile learnt of inspection, for the Inspected condition.
	hwKnown, inspectStarted, inspected bool
}

// inspectionStarted: an inspection was accepted and its result not read yet.
func inspectionStarted(h *metalv1alpha1.Host) bool {
	c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionInspected)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == metalv1alpha1.ReasonInspecting
}

func (s *step) run(ctx context.Context) error {
	h := s.host
	// A Host never registered needs no lookup: Register creates it (and copes if the
	// provisioner knew it after all).
	fresh := h.Status.ProvisionerID == "" && h.Status.ProvisioningState == "" && h.DeletionTimestamp == nil
	if !fresh {
		node, err := s.r.Provisioner.Get(ctx, NodeName(h))
		switch {
		case errors.Is(err, provisioner.ErrNotFound):
		case err != nil:
			s.unavailable(ctx, err)
			return nil
		default:
			s.node = &node
		}
	}
	hwKnown, err := s.r.hardwareKnown(ctx, h)
	if err != nil {
		return err
	}
	reg, credVersion, problem, err := s.r.registration(ctx, h)
	if err != nil {
		return err
	}
	s.hwKnown = hwKnown
	in := hostplan.Input{Host: h, Node: s.node, HardwareKnown: hwKnown, InspectionStarted: inspectionStarted(h),
		RebootRequested: h.Annotations[metalv1alpha1.AnnotationReboot] != h.Status.RebootToken,
		Reregister:      s.node != nil && (h.Status.ObservedGeneration != h.Generation || h.Status.CredentialsVersion != credVersion)}
	s.plan = hostplan.Decide(in)
	if s.plan.Action == hostplan.ActionRegister {
		if problem != nil {
			s.plan = *problem
			s.apply()
			return nil
		}
		reg.New = fresh
		n, err := s.r.Provisioner.Register(ctx, reg)
		if err != nil {
			s.actionFailed(ctx, err)
			s.apply()
			return nil
		}
		s.node = &n
		h.Status.ObservedGeneration, h.Status.CredentialsVersion = h.Generation, credVersion
		if s.plan.Failed {
			// A retry after a failed registration: keep reporting that failure until a
			// later look finds the retry worked.
			s.apply()
			return nil
		}
		in.Node, in.Reregister = s.node, false
		s.plan = hostplan.Decide(in)
		if s.plan.Action == hostplan.ActionRegister {
			// Registration failed in the provisioner (bad BMC): report it, retry later.
			s.apply()
			return nil
		}
	}
	if err := s.act(ctx); err != nil {
		return err
	}
	if s.inspected {
		// Reading the hardware changed nothing in the provisioner: the next step (Provide)
		// can follow at once instead of a poll later.
		in.Node, in.HardwareKnown, in.InspectionStarted, in.Reregister = s.node, true, false, false
		s.plan = hostplan.Decide(in)
		if err := s.act(ctx); err != nil {
			return err
		}
	}
	if !s.finalized {
		s.apply()
	}
	return nil
}

// unavailable reports that the provisioner could not be asked: the Host keeps its state,
// and the error is reported as a failed call would be.
func (s *step) unavailable(ctx context.Context, err error) {
	s.plan = hostplan.Plan{Action: hostplan.ActionWait, State: s.host.Status.ProvisioningState,
		Operational: s.host.Status.OperationalStatus, Reason: metalv1alpha1.ReasonProvisionerUnavailable}
	if s.plan.State == "" {
		s.plan.State = metalv1alpha1.StateRegistering
	}
	if s.plan.Operational == "" {
		s.plan.Operational = metalv1alpha1.OperationalOK
	}
	s.actionFailed(ctx, err)
	s.apply()
}

// actionFailed turns a failed provisioner call into the plan's error report.
func (s *step) actionFailed(ctx context.Context, err error) {
	switch {
	case errors.Is(err, provisioner.ErrBusy):
		// Queued behind the provisioner's concurrency limit, or the server is locked for
		// a moment: not a failure, just later.
		s.plan.Busy, s.plan.Failed = true, false
		s.plan.Message = "waiting for the provisioner: " + err.Error()
	case errors.Is(err, provisioner.ErrUnavailable):
		s.plan.Busy, s.plan.Failed = true, false
		s.plan.Reason = metalv1alpha1.ReasonProvisionerUnavailable
		s.plan.Message = "the provisioner is overloaded or unreachable; retrying"
		log.FromContext(ctx).Info("provisioner unavailable", "host", s.host.Name, "error", err.Error())
	default:
		s.plan.Failed, s.plan.Busy = true, false
		s.plan.Operational = metalv1alpha1.OperationalError
		if s.plan.Action == hostplan.ActionRegister {
			s.plan.Reason = hostplan.RegistrationReason(err.Error())
		} else {
			s.plan.Reason = failureReason(s.plan.Action)
		}
		s.plan.Message = fmt.Sprintf("%s: %v", s.plan.Action, err)
	}
}

func failureReason(a hostplan.Action) string {
	switch a {
	case hostplan.ActionInspect, hostplan.ActionReadHardware:
		return metalv1alpha1.ReasonInspectionFailed
	case hostplan.ActionProvision, hostplan.ActionAdopt:
		return metalv1alpha1.ReasonProvisioningFailed
	case hostplan.ActionDeprovision, hostplan.ActionDelete, hostplan.ActionDetach:
		return metalv1alpha1.ReasonDeprovisioningFailed
	case hostplan.ActionPowerOn, hostplan.ActionPowerOff:
		return metalv1alpha1.ReasonPowerChangeFailed
	}
	return metalv1alpha1.ReasonRegistrationFailed
}
