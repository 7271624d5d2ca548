package host

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// step is one reconcile of one Host.
type step struct {
	r         *Reconciler
	host      *metalv1alpha1.Host
	before    metalv1alpha1.HostStatus
	node      *provisioner.Node
	plan      hostplan.Plan
	finalized bool
	// lookupErr is why the provisioner could not be asked about the Host.
	lookupErr error
	// registration is what Register sends, and credentials the Secret's version in it.
	registration provisioner.Registration
	credentials  string
	// What this reconcile learnt of inspection, for the Inspected condition.
	hwKnown, inspectStarted, inspected bool
	// now is the reconcile's time: the wipe's clock.
	now time.Time
}

// run observes the Host, then decides and carries out one action at a time: the planner
// says when an action's effect is known at once, so the next can follow in the same
// reconcile. Each action runs at most once a reconcile, which bounds the loop; a decision
// for an action already carried out is reported, and the next reconcile looks again.
func (s *step) run(ctx context.Context) error {
	in, err := s.observe(ctx)
	if err != nil {
		return err
	}
	done := map[hostplan.Action]bool{}
	for {
		s.plan = hostplan.Decide(in)
		if done[s.plan.Action] {
			break
		}
		done[s.plan.Action] = true
		if err := s.recordFirst(ctx); err != nil {
			return err
		}
		res, err := s.execute(ctx, &in)
		if err != nil {
			return err
		}
		var again bool
		s.plan, again = hostplan.Conclude(s.plan, res)
		if s.plan.Finalize {
			return s.finalize(ctx)
		}
		if !again {
			break
		}
	}
	// The provisioner's messages may quote what it was given: never a BMC's password.
	s.plan.Message = provisioner.Redact(s.plan.Message, s.registration.Password)
	s.plan.WipeMessage = provisioner.Redact(s.plan.WipeMessage, s.registration.Password)
	s.apply()
	return nil
}

// observe gathers the planner's input: the provisioner's node, whether hardware is
// known, and what registering would send.
func (s *step) observe(ctx context.Context) (hostplan.Input, error) {
	h := s.host
	// A Host never registered needs no lookup: Register creates it (and copes if the
	// provisioner knew it after all).
	fresh := h.Status.ProvisionerID == "" && h.Status.ProvisioningState == "" && h.DeletionTimestamp == nil
	if !fresh {
		node, err := s.r.Provisioner.Get(ctx, nodeName(h))
		switch {
		case errors.Is(err, provisioner.ErrNotFound):
		case err != nil:
			s.lookupErr = err
		default:
			s.node = &node
		}
	}
	hw, err := s.r.hardwareData(ctx, h)
	if err != nil {
		return hostplan.Input{}, err
	}
	hwKnown := hw != nil
	if hwKnown && h.Status.Hardware == nil {
		// The status was lost (a restore from a backup): the summary comes back from
		// what inspection recorded.
		h.Status.Hardware = Summary(&hw.Spec)
	}
	reg, credVersion, problem, err := s.r.registration(ctx, h)
	if err != nil {
		return hostplan.Input{}, err
	}
	reg.New = fresh
	s.registration, s.credentials, s.hwKnown = reg, credVersion, hwKnown
	return hostplan.Input{Host: h, Node: s.node, HardwareKnown: hwKnown, InspectionStarted: inspectionStarted(h, s.node),
		RebootRequested:    hostplan.RebootRequested(h),
		Reregister:         s.node != nil && (h.Status.ObservedGeneration != h.Generation || h.Status.CredentialsVersion != credVersion),
		CredentialsProblem: problem, Unreachable: s.lookupErr != nil,
		Eraser: s.r.eraserFor(h), WipeTimeout: orDefault(s.r.WipeTimeout, 30*time.Minute), Now: s.now,
		MaxBackoff: orDefault(s.r.MaxBackoff, hostplan.DefaultMaxBackoff)}, nil
}

// inspectionStarted: an inspection was accepted, by the provisioner's node n as it is now,
// and its result not read yet. A node registered anew (the provisioner lost its records
// mid-inspection) has another ID and was never inspected: it is inspected again.
func inspectionStarted(h *metalv1alpha1.Host, n *provisioner.Node) bool {
	c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionInspected)
	return n != nil && n.ID == h.Status.ProvisionerID &&
		c != nil && c.Status == metav1.ConditionFalse && c.Reason == metalv1alpha1.ReasonInspecting
}

// resultOf turns a provisioner call's error into the planner's Result.
func resultOf(ctx context.Context, host string, err error) hostplan.Result {
	switch {
	case err == nil:
		return hostplan.Result{Outcome: hostplan.OutcomeDone}
	case errors.Is(err, provisioner.ErrNotFound):
		return hostplan.Result{Outcome: hostplan.OutcomeGone}
	case errors.Is(err, provisioner.ErrBusy):
		return hostplan.Result{Outcome: hostplan.OutcomeBusy, Message: err.Error()}
	case errors.Is(err, provisioner.ErrUnavailable):
		log.FromContext(ctx).Info("provisioner unavailable", "host", host, "error", err)
		return hostplan.Result{Outcome: hostplan.OutcomeUnavailable, Message: err.Error()}
	}
	return hostplan.Result{Outcome: hostplan.OutcomeFailed, Message: err.Error()}
}
