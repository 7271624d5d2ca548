package hostplan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Switching a server's power as spec.online says. Each attempt is counted in the Host's
// status.powerChange (written with the status of the reconcile that asks), so what became
// of it is known at the next look even when the provisioner says nothing: an attempt the
// provisioner is done with while the power still differs failed, with its last_error as
// the message if it has one. The next attempt waits Backoff after the failure; the record,
// and so the back-off, survives restarts with the status, and goes once the power is as
// asked. A status write lost after an attempt costs at most one attempt sooner: asking
// Ironic for the power a node is already going to changes nothing.

// PowerRetryFirst is the wait after a first failed power change; each further failure in a
// row doubles it, up to the Host's cap (Input.MaxBackoff).
const PowerRetryFirst = 5 * time.Second

// DefaultMaxBackoff caps every wait of a failing Host when Input.MaxBackoff is not set.
const DefaultMaxBackoff = 60 * time.Second

// Backoff is the wait after the n-th failure in a row (n below 1 counts as 1): first,
// doubled for each failure after the first, at most limit. It never shrinks as n grows.
func Backoff(n int32, first, limit time.Duration) time.Duration {
	if first <= 0 || limit <= 0 {
		return max(min(first, limit), 0)
	}
	d := min(first, limit)
	for i := int32(1); i < n; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}

// PowerRetryAt is when the attempt after c's last failure may be asked for: LastFailureAt
// plus the back-off of Failures, capped at limit. The zero time for a record without a
// failure.
func PowerRetryAt(c *metalv1alpha1.PowerChange, limit time.Duration) time.Time {
	if c == nil || c.Failures < 1 || c.LastFailureAt == nil {
		return time.Time{}
	}
	return c.LastFailureAt.Add(Backoff(c.Failures, PowerRetryFirst, limit))
}

func targetOf(online bool) metalv1alpha1.PowerState {
	if online {
		return metalv1alpha1.PowerOn
	}
	return metalv1alpha1.PowerOff
}

// powerAsAsked: the provisioner knows the server's power, and it is what spec.online says.
func powerAsAsked(h *metalv1alpha1.Host, n *provisioner.Node) bool {
	return n.PowerOn != nil && *n.PowerOn == h.Spec.Online
}

// power decides for a Host whose server anvil keeps powered as spec.online says (it is
// Available, or Provisioned and not rebooting): at rest is the plan when the power is as
// asked. Otherwise one attempt at a time: asked for (and counted), waited for, judged
// when the provisioner is done with it, and after a failure asked again only once its
// back-off has passed.
func power(in Input, atRest Plan) Plan {
	h, n := in.Host, in.Node
	p := atRest
	p.powerDecided = true
	if powerAsAsked(h, n) {
		p.PowerChange = nil // a success resets the back-off
		return p
	}
	target := targetOf(h.Spec.Online)
	c := h.Status.PowerChange.DeepCopy()
	if c != nil && c.Target != target {
		c = nil // the spec changed its mind: the record was of the other power
	}
	p.PowerChange = c
	failing := c != nil && c.Failures > 0
	if failing {
		// Until the power is as asked, the Host reports the last failure it recorded.
		p.Operational, p.Reason, p.Message = metalv1alpha1.OperationalError, metalv1alpha1.ReasonPowerChangeFailed, h.Status.LastError
	}
	action := ActionPowerOff
	if h.Spec.Online {
		action = ActionPowerOn
	}
	switch retryAt := PowerRetryAt(c, in.maxBackoff()); {
	case n.Busy:
		// An attempt is under way (ours or anyone's): its end is the provisioner's to report.
		p.Busy = true
	case c != nil && c.Attempts > c.Failures:
		// The provisioner is done with the attempt and the power still differs: it failed.
		c.Failures, c.LastFailureAt = c.Attempts, &metav1.Time{Time: in.Now}
		p = powerFailed(p, action, c, n.LastError, powerReport(n, target), in.maxBackoff())
		p.Action = ActionWait
	case failing && in.Now.Before(retryAt):
		p.RetryAfter = retryAt.Sub(in.Now)
	default:
		if c == nil {
			c = &metalv1alpha1.PowerChange{Target: target}
		}
		c.Attempts = c.Failures + 1
		p.Action, p.PowerChange = action, c
	}
	return p
}

// powerFailed reports c's latest failure, which the provisioner explained with reported
// (its last_error; seen describes the power when it says nothing), and waits for the back-off.
func powerFailed(p Plan, a Action, c *metalv1alpha1.PowerChange, reported, seen string, limit time.Duration) Plan {
	if reported == "" {
		reported = seen
	}
	p.PowerChange = c
	p.Failed, p.Busy = true, false
	p.Operational, p.Reason = metalv1alpha1.OperationalError, metalv1alpha1.ReasonPowerChangeFailed
	retryAt := PowerRetryAt(c, limit)
	p.Message = fmt.Sprintf("%s failed (%d in a row; next attempt at %s): %s", a, c.Failures, retryAt.UTC().Format(time.RFC3339), reported)
	p.RetryAfter = Backoff(c.Failures, PowerRetryFirst, limit)
	return p
}

// powerReport is what the provisioner says of the server's power after an attempt to
// switch it to target, for a failure it gives no message for.
func powerReport(n *provisioner.Node, target metalv1alpha1.PowerState) string {
	if n.PowerOn == nil {
		return fmt.Sprintf("the provisioner does not know the server's power after it was asked to switch it %s", target)
	}
	return fmt.Sprintf("the server's power is still %s after the provisioner was asked to switch it %s", targetOf(*n.PowerOn), target)
}

// concludePower is what the outcome of asking for a power change means for its record: a
// call refused is a failed attempt; a call not made (the server locked, the provisioner
// unreachable or without the node) is no attempt.
func concludePower(p Plan, r Result) Plan {
	if (p.Action != ActionPowerOn && p.Action != ActionPowerOff) || p.PowerChange == nil {
		return p
	}
	c := p.PowerChange.DeepCopy()
	switch r.Outcome {
	case OutcomeDone:
		return p
	case OutcomeBusy, OutcomeUnavailable, OutcomeGone:
		c.Attempts = c.Failures
		if c.Attempts == 0 {
			c = nil
		}
		p.PowerChange = c
		return p
	}
	c.Failures, c.LastFailureAt = c.Attempts, &metav1.Time{Time: p.now}
	return powerFailed(p, p.Action, c, r.Message, "the provisioner refused the call", p.backoffCap)
}
