package ironic

import (
	"slices"
	"sync"
	"time"
)

// queue bounds how many nodes run one kind of long operation (deploy, clean) at once and
// hands free slots out first come, first served. Callers never wait in it: admit says yes
// or records the node and says no; the caller comes back later.
type queue struct {
	kind string
	max  int
	// states are the Ironic provision states a node holds a slot in.
	states []string

	mu       sync.Mutex
	inflight map[string]*slot
	waiting  []waiter
}

type slot struct {
	// pending while the caller's request that starts the work is under way: the node
	// has not left its old state yet, and must not be released for that.
	pending bool
	// seen is when a caller's read last showed the node: the background check leaves
	// alone the nodes the caller is watching anyway.
	seen time.Time
}

type waiter struct {
	name      string
	lastAsked time.Time
}

// A waiter that has not asked for staleAfter no longer holds back those behind it (its
// caller may be backing off, or gone); after dropAfter it leaves the queue.
const (
	staleAfter = 30 * time.Second
	dropAfter  = 10 * time.Minute
)

func newQueue(kind string, max int, states ...string) *queue {
	return &queue{kind: kind, max: max, states: states, inflight: map[string]*slot{}}
}

// admit gives name a slot (marked pending) if it already holds one, or if a slot is free
// and fewer fresh waiters than free slots are ahead of it. Otherwise name joins (or keeps
// its place in) the queue. It returns whether name may start, and how many are ahead.
func (q *queue) admit(name string, now time.Time) (ok bool, ahead int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s, ok := q.inflight[name]; ok {
		s.pending = true
		return true, 0
	}
	q.prune(now)
	pos := slices.IndexFunc(q.waiting, func(w waiter) bool { return w.name == name })
	if pos < 0 {
		q.waiting = append(q.waiting, waiter{name: name})
		pos = len(q.waiting) - 1
	}
	q.waiting[pos].lastAsked = now
	for _, w := range q.waiting[:pos] {
		if now.Sub(w.lastAsked) < staleAfter {
			ahead++
		}
	}
	if ahead < q.max-len(q.inflight) {
		q.waiting = slices.Delete(q.waiting, pos, pos+1)
		q.inflight[name] = &slot{pending: true}
		return true, 0
	}
	return false, ahead
}

// started marks the request that starts name's work as answered: from now on, seeing the
// node outside the queue's states frees its slot.
func (q *queue) started(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s, ok := q.inflight[name]; ok {
		s.pending = false
		s.seen = time.Now() // the caller that started it will be looking
	}
}

// hold records a node seen working (at start-up, from Ironic) as holding a slot.
func (q *queue) hold(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.inflight[name]; !ok {
		q.inflight[name] = &slot{}
	}
}

// observe frees name's slot when the node was seen out of the queue's states and with no
// target state. It returns the waiters that may start now (to wake them), or nil.
func (q *queue) observe(name, state, target string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, ok := q.inflight[name]
	if !ok {
		return nil
	}
	s.seen = time.Now()
	if s.pending || slices.Contains(q.states, state) || target != "" {
		return nil
	}
	return q.releaseLocked(name)
}

// release frees name's slot and forgets it as a waiter (the request failed, or the node
// is gone). It returns the waiters that may start now.
func (q *queue) release(name string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = slices.DeleteFunc(q.waiting, func(w waiter) bool { return w.name == name })
	return q.releaseLocked(name)
}

func (q *queue) releaseLocked(name string) []string {
	if _, ok := q.inflight[name]; !ok {
		return nil
	}
	delete(q.inflight, name)
	free := q.max - len(q.inflight)
	var next []string
	for _, w := range q.waiting {
		if len(next) >= free {
			break
		}
		next = append(next, w.name)
	}
	return next
}

func (q *queue) prune(now time.Time) {
	q.waiting = slices.DeleteFunc(q.waiting, func(w waiter) bool { return now.Sub(w.lastAsked) > dropAfter })
}

// inflightNames are the nodes holding a slot, not pending and not seen since notBefore,
// for the background check.
func (q *queue) inflightNames(notBefore time.Time) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var names []string
	for n, s := range q.inflight {
		if !s.pending && s.seen.Before(notBefore) {
			names = append(names, n)
		}
	}
	return names
}

// counts reports slots in use and nodes waiting.
func (q *queue) counts() (inflight, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight), len(q.waiting)
}
