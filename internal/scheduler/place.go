package scheduler

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Placement is the decision for one unbound Machine: the pool it goes to, or why none
// fits and when to look again.
type Placement struct {
	// Pool is the pool the Machine was charged to, "" when none fits.
	Pool string
	// Message says why none fits (the Scheduled condition's message): each reason and how
	// many pools it turned down, then what runtimes that refused the Machine said.
	Message string
	// RetryAfter, when none fits, is when a runtime's refusal ends (zero: none runs): no
	// event announces it. Other changes wake a waiting Machine (Queue.Pending).
	RetryAfter time.Duration
	// Waiting: none fits yet, but there is no pool yet, or one that has not reported yet
	// may take the Machine (Decision.Waiting): not news to tell its user (no Warning), only
	// a condition. A pool's first report wakes the Machine; RetryAfter is at most the end
	// of the pool's start.
	Waiting bool
}

// Place decides where the Machine key (uid) goes: the pools that refused it are kept off
// it, the pool that fits best is charged at once (Cache.ScheduleAndAssume), and the Machine
// is recorded as waiting for a change when none fits, or as placed when one does. It is
// the scheduler controller's one decision for an unbound Machine.
func Place(c *Cache, q *Queue, key types.NamespacedName, uid types.UID, r *Request, now time.Time, s Strategy) Placement {
	r.ExcludedUntil = q.ExcludedUntil(uid)
	d := c.ScheduleAndAssume(uid, r, now, s)
	if d.Pool != nil {
		q.SetPending(key, false)
		return Placement{Pool: d.Pool.Name}
	}
	q.SetPending(key, true)
	msg := "no MachinePool fits: " + d.Rejections.Summary()
	if refused := q.RefusalText(uid); refused != "" {
		msg += " (" + refused + ")"
	}
	if d.Waiting {
		msg = "waiting for MachinePools to report: " + msg
		if d.Rejections.Total == 0 {
			msg = "waiting for MachinePools: none exists yet"
		}
	}
	pl := Placement{Message: msg, RetryAfter: q.RetryAfter(uid, now), Waiting: d.Waiting}
	if wait := d.WaitUntil.Sub(now); wait > 0 && (pl.RetryAfter == 0 || wait < pl.RetryAfter) {
		pl.RetryAfter = wait
	}
	return pl
}
