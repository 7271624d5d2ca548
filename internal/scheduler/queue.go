package scheduler

import (
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Queue is what the scheduler remembers about Machines between decisions, beside the
// Cache's charges: which Machines wait for the cluster to change because no pool fits
// them, and, per Machine, which pools' runtimes refused it, what they said, and until
// when each such pool is kept off it.
//
// It lives in memory only, so a restarted manager forgets refusals it had acted on (see
// the package documentation for why that is safe). It is safe for concurrent use.
type Queue struct {
	backoff time.Duration

	mu      sync.Mutex
	pending map[types.NamespacedName]struct{}
	// refused is keyed by UID, not name: a Machine created again under the same name is
	// a new Machine, and no runtime has refused it yet.
	refused map[types.UID]map[string]refusal
}

// refusal is one pool's runtime turning one Machine down.
type refusal struct {
	until   time.Time
	message string
}

// NewQueue returns an empty queue that keeps a pool off a Machine for backoff after the
// pool's runtime refused it.
func NewQueue(backoff time.Duration) *Queue {
	return &Queue{
		backoff: backoff,
		pending: map[types.NamespacedName]struct{}{},
		refused: map[types.UID]map[string]refusal{},
	}
}

// SetPending records whether the Machine key waits for a change that could make it fit.
func (q *Queue) SetPending(key types.NamespacedName, pending bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if pending {
		q.pending[key] = struct{}{}
	} else {
		delete(q.pending, key)
	}
}

// Pending returns the waiting Machines, in no particular order, to try again after a change.
func (q *Queue) Pending() []types.NamespacedName {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(q.pending))
	for k := range q.pending {
		keys = append(keys, k)
	}
	return keys
}

// Refuse records that pool's runtime refused the Machine uid at now, saying message. The
// pool is kept off the Machine until now plus the backoff; a later refusal by the same
// pool replaces the earlier one, so the backoff starts again.
func (q *Queue) Refuse(uid types.UID, pool, message string, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.refused[uid] == nil {
		q.refused[uid] = map[string]refusal{}
	}
	q.refused[uid][pool] = refusal{until: now.Add(q.backoff), message: message}
}

// PoolChanged ends every Machine's exclusion from pool, because what the pool offers
// changed (its capacity, classes, architectures, readiness): a runtime that refused a
// Machine for want of a fitting server may take it now that one was inspected, and the
// Machine should not wait out the backoff for that. A runtime that still refuses is
// recorded again; pools change rarely, so that retry is bounded by the pool's changes.
func (q *Queue) PoolChanged(pool string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for uid, pools := range q.refused {
		delete(pools, pool)
		if len(pools) == 0 {
			delete(q.refused, uid)
		}
	}
}

// ExcludedUntil returns, for Request.ExcludedUntil, each pool that refused the Machine
// and until when it is kept off; nil when none did. The map is the caller's to keep.
func (q *Queue) ExcludedUntil(uid types.UID) map[string]time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.refused[uid]) == 0 {
		return nil // the common case allocates nothing
	}
	out := make(map[string]time.Time, len(q.refused[uid]))
	for pool, rf := range q.refused[uid] {
		out[pool] = rf.until
	}
	return out
}

// RetryAfter is how long until the first of the Machine's exclusions still running at now
// ends, or zero when none is. The end of a backoff is an outside clock that no event
// announces, so a Machine left unschedulable is looked at again after this long.
func (q *Queue) RetryAfter(uid types.UID, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	var d time.Duration
	for _, rf := range q.refused[uid] {
		if left := rf.until.Sub(now); left > 0 && (d == 0 || left < d) {
			d = left
		}
	}
	return d
}

// RefusalText joins what the runtimes that refused the Machine said, pool by pool in name
// order, skipping empty messages; "" when none said anything. It keeps the runtime's own
// reason (no Host a HostPolicy allows, ...) in the Machine's Unschedulable message.
func (q *Queue) RefusalText(uid types.UID) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	pools := make([]string, 0, len(q.refused[uid]))
	for pool := range q.refused[uid] {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	var parts []string
	for _, pool := range pools {
		if msg := q.refused[uid][pool].message; msg != "" {
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, "; ")
}

// Forget drops all the queue holds for a Machine that is gone: that it waits, and its
// refusals.
func (q *Queue) Forget(key types.NamespacedName, uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pending, key)
	delete(q.refused, uid)
}
