package hostplan

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const ironicPowerError = "Failed to change power state to 'power on' by 'power on'. Error: the server's QEMU did not start"

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n            int32
		first, limit time.Duration
		want         time.Duration
	}{
		{1, 5 * time.Second, time.Minute, 5 * time.Second},
		{2, 5 * time.Second, time.Minute, 10 * time.Second},
		{3, 5 * time.Second, time.Minute, 20 * time.Second},
		{4, 5 * time.Second, time.Minute, 40 * time.Second},
		{5, 5 * time.Second, time.Minute, time.Minute},
		{6, 5 * time.Second, time.Minute, time.Minute},
		{math.MaxInt32, 5 * time.Second, time.Minute, time.Minute},
		{0, 5 * time.Second, time.Minute, 5 * time.Second},  // no failure counts as the first
		{-3, 5 * time.Second, time.Minute, 5 * time.Second}, // so does a negative count
		{1, 5 * time.Second, 2 * time.Second, 2 * time.Second},
		{1, time.Second, time.Minute, time.Second},                // the controller's own failures
		{11, time.Second, time.Minute, time.Minute},               // 1 s << 10 is past the cap
		{30, time.Second, math.MaxInt64, (1 << 29) * time.Second}, // doubling never overflows
		{80, time.Second, math.MaxInt64, math.MaxInt64},
		{3, 0, time.Minute, 0},
	} {
		if got := Backoff(tc.n, tc.first, tc.limit); got != tc.want {
			t.Errorf("Backoff(%d, %s, %s) = %s, want %s", tc.n, tc.first, tc.limit, got, tc.want)
		}
	}
}

// change is a power record: attempts, failures, and the last failure ago before t0.
func change(target metalv1alpha1.PowerState, attempts, failures int32, ago time.Duration) *metalv1alpha1.PowerChange {
	c := &metalv1alpha1.PowerChange{Target: target, Attempts: attempts, Failures: failures}
	if failures > 0 {
		c.LastFailureAt = &metav1.Time{Time: t0.Add(-ago)}
	}
	return c
}

func recording(c *metalv1alpha1.PowerChange) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Status.PowerChange = c
		if c != nil && c.Failures > 0 {
			h.Status.LastError = "PowerOn failed (earlier)"
			h.Status.OperationalStatus = metalv1alpha1.OperationalError
		}
	}
}

func busyNode(n *provisioner.Node)     { n.Busy = true }
func unknownPower(n *provisioner.Node) { n.PowerOn = nil }
func lastError(msg string) func(*provisioner.Node) {
	return func(n *provisioner.Node) { n.LastError = msg }
}

// TestDecidePower: one attempt at a time, each judged once the provisioner is done with it,
// a failed one asked again only after its back-off, and a success forgetting the failures.
func TestDecidePower(t *testing.T) {
	provisionedOn := func(opts ...hostOpt) *metalv1alpha1.Host {
		return host(append([]hostOpt{wants(imgA), ran(imgA), online, state(metalv1alpha1.StateProvisioned)}, opts...)...)
	}
	active := func(opts ...func(*provisioner.Node)) *provisioner.Node {
		return node(provisioner.StateActive, append([]func(*provisioner.Node){running(imgA)}, opts...)...)
	}
	failing := change(metalv1alpha1.PowerOn, 1, 1, 2*time.Second)
	for _, tc := range []struct {
		name       string
		h          *metalv1alpha1.Host
		n          *provisioner.Node
		reboot     bool
		action     Action
		record     *metalv1alpha1.PowerChange
		op         metalv1alpha1.OperationalStatus
		failed     bool // a failure counted now
		busy       bool
		retryAfter time.Duration
		message    string // contained in the plan's message
	}{
		{"power as asked", provisionedOn(), active(powered), false, ActionWait, nil, metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"a success resets the failures", provisionedOn(recording(change(metalv1alpha1.PowerOn, 4, 3, time.Second))), active(powered), false,
			ActionWait, nil, metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"off, asked on: the first attempt", provisionedOn(), active(), false,
			ActionPowerOn, change(metalv1alpha1.PowerOn, 1, 0, 0), metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"on, asked off", host(wants(imgA), ran(imgA)), active(powered), false,
			ActionPowerOff, change(metalv1alpha1.PowerOff, 1, 0, 0), metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"power unknown: set as asked", provisionedOn(), active(unknownPower), false,
			ActionPowerOn, change(metalv1alpha1.PowerOn, 1, 0, 0), metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"the attempt under way is waited for", provisionedOn(recording(change(metalv1alpha1.PowerOn, 1, 0, 0))), active(busyNode), false,
			ActionWait, change(metalv1alpha1.PowerOn, 1, 0, 0), metalv1alpha1.OperationalOK, false, true, 0, ""},
		{"the provisioner's error fails the attempt", provisionedOn(recording(change(metalv1alpha1.PowerOn, 1, 0, 0))), active(lastError(ironicPowerError)), false,
			ActionWait, change(metalv1alpha1.PowerOn, 1, 1, 0), metalv1alpha1.OperationalError, true, false, 5 * time.Second,
			"PowerOn failed (1 in a row; next attempt at 2026-01-02T03:04:10Z): " + ironicPowerError},
		{"an attempt done without the power changing failed, message or not", provisionedOn(recording(change(metalv1alpha1.PowerOn, 1, 0, 0))), active(), false,
			ActionWait, change(metalv1alpha1.PowerOn, 1, 1, 0), metalv1alpha1.OperationalError, true, false, 5 * time.Second,
			"the server's power is still Off after the provisioner was asked to switch it On"},
		{"an attempt leaving the power unknown failed", provisionedOn(recording(change(metalv1alpha1.PowerOn, 1, 0, 0))), active(unknownPower), false,
			ActionWait, change(metalv1alpha1.PowerOn, 1, 1, 0), metalv1alpha1.OperationalError, true, false, 5 * time.Second,
			"the provisioner does not know the server's power"},
		{"the back-off is waited out", provisionedOn(recording(failing)), active(lastError(ironicPowerError)), false,
			ActionWait, failing, metalv1alpha1.OperationalError, false, false, 3 * time.Second, "PowerOn failed (earlier)"},
		{"a reboot waits for the power", provisionedOn(recording(failing)), active(), true,
			ActionWait, failing, metalv1alpha1.OperationalError, false, false, 3 * time.Second, "PowerOn failed (earlier)"},
		{"after the back-off: the next attempt", provisionedOn(recording(change(metalv1alpha1.PowerOn, 1, 1, 5*time.Second))), active(lastError(ironicPowerError)), false,
			ActionPowerOn, change(metalv1alpha1.PowerOn, 2, 1, 5*time.Second), metalv1alpha1.OperationalError, false, false, 0, "PowerOn failed (earlier)"},
		{"a retry under way keeps the failure", provisionedOn(recording(change(metalv1alpha1.PowerOn, 2, 1, 6*time.Second))), active(busyNode), false,
			ActionWait, change(metalv1alpha1.PowerOn, 2, 1, 6*time.Second), metalv1alpha1.OperationalError, false, true, 0, "PowerOn failed (earlier)"},
		{"a failed retry doubles the wait", provisionedOn(recording(change(metalv1alpha1.PowerOn, 2, 1, 6*time.Second))), active(lastError(ironicPowerError)), false,
			ActionWait, change(metalv1alpha1.PowerOn, 2, 2, 0), metalv1alpha1.OperationalError, true, false, 10 * time.Second, "PowerOn failed (2 in a row; "},
		{"the wait is capped", provisionedOn(recording(change(metalv1alpha1.PowerOn, 8, 8, 59*time.Second))), active(lastError(ironicPowerError)), false,
			ActionWait, change(metalv1alpha1.PowerOn, 8, 8, 59*time.Second), metalv1alpha1.OperationalError, false, false, time.Second, ""},
		{"a record of the other power is void", provisionedOn(recording(change(metalv1alpha1.PowerOff, 3, 3, time.Second))), active(), false,
			ActionPowerOn, change(metalv1alpha1.PowerOn, 1, 0, 0), metalv1alpha1.OperationalOK, false, false, 0, ""},
		{"an available server too", host(online, recording(failing)), node(provisioner.StateAvailable), false,
			ActionWait, failing, metalv1alpha1.OperationalError, false, false, 3 * time.Second, ""},
		{"an available server's next attempt", host(online, recording(change(metalv1alpha1.PowerOn, 1, 1, time.Minute))), node(provisioner.StateAvailable), false,
			ActionPowerOn, change(metalv1alpha1.PowerOn, 2, 1, time.Minute), metalv1alpha1.OperationalError, false, false, 0, ""},
		{"reboot when the power is as asked", provisionedOn(), active(powered), true, ActionReboot, nil, metalv1alpha1.OperationalOK, false, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(Input{Host: tc.h, Node: tc.n, RebootRequested: tc.reboot, Now: t0})
			if p.Action != tc.action || p.Operational != tc.op || p.Failed != tc.failed || p.Busy != tc.busy || p.RetryAfter != tc.retryAfter {
				t.Fatalf("Decide = %s %s failed %v busy %v retry after %s, want %s %s failed %v busy %v retry after %s",
					p.Action, p.Operational, p.Failed, p.Busy, p.RetryAfter, tc.action, tc.op, tc.failed, tc.busy, tc.retryAfter)
			}
			if !samePowerChange(p.PowerChange, tc.record, t0) {
				t.Fatalf("power record %+v, want %+v", p.PowerChange, tc.record)
			}
			if !strings.Contains(p.Message, tc.message) {
				t.Fatalf("message %q, want it to contain %q", p.Message, tc.message)
			}
			wantReason := metalv1alpha1.ReasonPowerChangeFailed
			if tc.op == metalv1alpha1.OperationalOK {
				wantReason = metalv1alpha1.ReasonProvisioned
				if tc.h.Spec.Image == nil {
					wantReason = metalv1alpha1.ReasonReady
				}
			}
			if p.Reason != wantReason {
				t.Fatalf("reason %s, want %s", p.Reason, wantReason)
			}
		})
	}
}

// Wherever the decision is not about the power, the record is kept as it is.
func TestPowerRecordKeptElsewhere(t *testing.T) {
	c := change(metalv1alpha1.PowerOn, 2, 1, time.Second)
	for name, in := range map[string]Input{
		"provisioner unreachable": {Host: host(online, recording(c)), Unreachable: true},
		"registering again":       {Host: host(online, recording(c), wants(imgA), ran(imgA)), Node: node(provisioner.StateActive, running(imgA)), Reregister: true},
		"deprovisioning":          {Host: host(online, recording(c), ran(imgA)), Node: node(provisioner.StateActive, running(imgA))},
		"deleting":                {Host: host(online, recording(c), deleted), Node: node(provisioner.StateAvailable)},
	} {
		if p := Decide(in); p.PowerChange != c {
			t.Errorf("%s: power record %+v, want the Host's %+v", name, p.PowerChange, c)
		}
	}
}

func TestConcludePower(t *testing.T) {
	asked := func(c *metalv1alpha1.PowerChange) Plan {
		return Decide(Input{Host: host(online, recording(c)), Node: node(provisioner.StateAvailable), Now: t0})
	}
	first := asked(nil)
	retry := asked(change(metalv1alpha1.PowerOn, 1, 1, time.Minute))
	for _, tc := range []struct {
		name       string
		plan       Plan
		res        Result
		record     *metalv1alpha1.PowerChange
		failed     bool
		retryAfter time.Duration
		message    string
	}{
		{"asked: the attempt is under way", first, Result{Outcome: OutcomeDone}, change(metalv1alpha1.PowerOn, 1, 0, 0), false, 0, ""},
		{"a locked server: no attempt", first, Result{Outcome: OutcomeBusy, Message: "locked"}, nil, false, 0, "waiting for the provisioner"},
		{"an unreachable provisioner: no attempt", retry, Result{Outcome: OutcomeUnavailable, Message: "503"}, change(metalv1alpha1.PowerOn, 1, 1, time.Minute), false, 0, ""},
		{"a node gone: no attempt", first, Result{Outcome: OutcomeGone}, nil, false, 0, ""},
		{"a refused call is a failed attempt", first, Result{Outcome: OutcomeFailed, Message: "node is in maintenance"},
			change(metalv1alpha1.PowerOn, 1, 1, 0), true, 5 * time.Second, "PowerOn failed (1 in a row; next attempt at 2026-01-02T03:04:10Z): node is in maintenance"},
		{"a refused retry doubles the wait", retry, Result{Outcome: OutcomeFailed, Message: "boom"},
			change(metalv1alpha1.PowerOn, 2, 2, 0), true, 10 * time.Second, "PowerOn failed (2 in a row; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := Conclude(tc.plan, tc.res)
			if !samePowerChange(p.PowerChange, tc.record, t0) || p.Failed != tc.failed || p.RetryAfter != tc.retryAfter || !strings.Contains(p.Message, tc.message) {
				t.Fatalf("Conclude = record %+v failed %v retry after %s message %q;\nwant %+v %v %s %q",
					p.PowerChange, p.Failed, p.RetryAfter, p.Message, tc.record, tc.failed, tc.retryAfter, tc.message)
			}
			if p.Action != tc.plan.Action {
				t.Fatalf("Conclude changed the action to %s", p.Action)
			}
			if tc.failed && (p.Busy || p.Reason != metalv1alpha1.ReasonPowerChangeFailed || p.Operational != metalv1alpha1.OperationalError) {
				t.Fatalf("a failed attempt reported as %+v", p)
			}
		})
	}
}

func samePowerChange(a, b *metalv1alpha1.PowerChange, now time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	at := func(c *metalv1alpha1.PowerChange) time.Time {
		if c.LastFailureAt == nil {
			return time.Time{}
		}
		return c.LastFailureAt.Time
	}
	return a.Target == b.Target && a.Attempts == b.Attempts && a.Failures == b.Failures && at(a).Equal(at(b))
}

// TestPowerRetriesProperties runs a Host through a provisioner that fails, succeeds, stays
// busy or refuses at random, at random times, applying each plan as the controller does.
// Safety: one attempt at a time, never one before the back-off of the last failure has
// passed, and the wait after a failure never shrinks between consecutive failures and
// never exceeds the cap. A success resets it. Liveness: a Host waiting says when to look
// again, and a Host looked at once the wait is over asks again.
func TestPowerRetriesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.SampledFrom([]time.Duration{3 * time.Second, 10 * time.Second, time.Minute, 10 * time.Minute}).Draw(t, "cap")
		h := host(wants(imgA), ran(imgA), state(metalv1alpha1.StateProvisioned))
		h.Spec.Online = rapid.Bool().Draw(t, "online")
		n := node(provisioner.StateActive, running(imgA))
		wrong := !h.Spec.Online
		n.PowerOn = &wrong
		now := t0
		var waits []time.Duration // the back-off after each failure in a row
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Second, 4 * time.Second, 20 * time.Second, 2 * time.Minute}).Draw(t, "wait"))
			before := h.Status.PowerChange.DeepCopy()
			p := Decide(Input{Host: h, Node: n, Now: now, MaxBackoff: limit})
			powerAsked := p.Action == ActionPowerOn || p.Action == ActionPowerOff
			if powerAsked {
				if before != nil && before.Attempts > before.Failures {
					t.Fatalf("step %d: asked again with an attempt under way: %+v", step, before)
				}
				if at := PowerRetryAt(before, limit); now.Before(at) {
					t.Fatalf("step %d: asked at %s, before the back-off ends at %s", step, now, at)
				}
				switch rapid.IntRange(0, 3).Draw(t, "call") {
				case 0:
					p, _ = Conclude(p, Result{Outcome: OutcomeFailed, Message: "refused"})
				case 1:
					p, _ = Conclude(p, Result{Outcome: OutcomeBusy, Message: "locked"})
				default:
					p, _ = Conclude(p, Result{Outcome: OutcomeDone})
					n.Busy, n.LastError = true, ""
				}
			} else if p.PowerChange != nil && p.PowerChange.Failures > 0 && !n.Busy && !p.Failed {
				// Waiting out a back-off: the controller is told when to come back.
				if want := PowerRetryAt(p.PowerChange, limit).Sub(now); p.RetryAfter != want || want <= 0 {
					t.Fatalf("step %d: waiting with retry after %s, want %s", step, p.RetryAfter, want)
				}
			}
			// The controller writes the plan's status.
			h.Status.PowerChange = p.PowerChange
			if p.Failed {
				h.Status.LastError = p.Message
			}
			if c := p.PowerChange; c != nil {
				if c.Failures > c.Attempts || c.Attempts > c.Failures+1 || c.Attempts < 1 {
					t.Fatalf("step %d: record %+v", step, c)
				}
				if c.Failures > 0 && before != nil && c.Failures > before.Failures+1 {
					t.Fatalf("step %d: %d failures counted at once", step, c.Failures-before.Failures)
				}
			}
			if powerAsAsked(h, n) && p.PowerChange != nil {
				t.Fatalf("step %d: the power is as asked, the record stays: %+v", step, p.PowerChange)
			}
			switch c := p.PowerChange; {
			case c == nil:
				waits = nil // a success resets the back-off
			case before == nil || c.Failures > before.Failures:
				if c.Failures == 0 {
					break
				}
				w := PowerRetryAt(c, limit).Sub(c.LastFailureAt.Time)
				if w > limit {
					t.Fatalf("step %d: waits %s after failure %d, past the cap %s", step, w, c.Failures, limit)
				}
				if len(waits) > 0 && w < waits[len(waits)-1] {
					t.Fatalf("step %d: the wait shrank from %s to %s", step, waits[len(waits)-1], w)
				}
				waits = append(waits, w)
			}
			// The provisioner, between looks: an attempt under way ends at random.
			if n.Busy && rapid.Bool().Draw(t, "attempt ends") {
				n.Busy = false
				switch rapid.IntRange(0, 2).Draw(t, "attempt") {
				case 0:
					on := h.Spec.Online
					n.PowerOn = &on
				case 1:
					n.LastError = ironicPowerError
				}
			}
		}
	})
}
