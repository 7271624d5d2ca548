package scheduler

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
)

const testBackoff = 5 * time.Minute

func TestQueueRefusals(t *testing.T) {
	type refusal struct {
		pool, message string
		at            time.Duration // after testNow
	}
	cases := []struct {
		name       string
		refusals   []refusal
		now        time.Duration // after testNow
		wantUntil  map[string]time.Duration
		wantRetry  time.Duration
		wantText   string
		wantKeptOf []string // pools Fits turns down at now
	}{
		{name: "none", now: time.Minute},
		{name: "one, backoff running",
			refusals: []refusal{{"a", "no capacity", 0}}, now: time.Minute,
			wantUntil: map[string]time.Duration{"a": testBackoff}, wantRetry: 4 * time.Minute,
			wantText: "no capacity", wantKeptOf: []string{"a"}},
		{name: "one, backoff over: tried again, the runtime's word kept",
			refusals: []refusal{{"a", "no capacity", 0}}, now: testBackoff,
			wantUntil: map[string]time.Duration{"a": testBackoff}, wantText: "no capacity"},
		{name: "two: retried when the first backoff ends",
			refusals: []refusal{{"a", "no capacity", 0}, {"b", "wrong architecture", 2 * time.Minute}}, now: 3 * time.Minute,
			wantUntil: map[string]time.Duration{"a": testBackoff, "b": 2*time.Minute + testBackoff}, wantRetry: 2 * time.Minute,
			wantText: "no capacity; wrong architecture", wantKeptOf: []string{"a", "b"}},
		{name: "two: one over, the other still running",
			refusals: []refusal{{"a", "no capacity", 0}, {"b", "wrong architecture", 2 * time.Minute}}, now: 6 * time.Minute,
			wantUntil: map[string]time.Duration{"a": testBackoff, "b": 2*time.Minute + testBackoff}, wantRetry: time.Minute,
			wantText: "no capacity; wrong architecture", wantKeptOf: []string{"b"}},
		{name: "text in pool order, not refusal order",
			refusals: []refusal{{"b", "from b", 0}, {"a", "from a", 0}}, now: 0,
			wantUntil: map[string]time.Duration{"a": testBackoff, "b": testBackoff}, wantRetry: testBackoff,
			wantText: "from a; from b", wantKeptOf: []string{"a", "b"}},
		{name: "refused again: the backoff starts again, the new word replaces the old",
			refusals: []refusal{{"a", "no capacity", 0}, {"a", "no Host a HostPolicy allows", 4 * time.Minute}}, now: 6 * time.Minute,
			wantUntil: map[string]time.Duration{"a": 9 * time.Minute}, wantRetry: 3 * time.Minute,
			wantText: "no Host a HostPolicy allows", wantKeptOf: []string{"a"}},
		{name: "a refusal without a message adds no text",
			refusals: []refusal{{"a", "", 0}, {"b", "no capacity", 0}}, now: 0,
			wantUntil: map[string]time.Duration{"a": testBackoff, "b": testBackoff}, wantRetry: testBackoff,
			wantText: "no capacity", wantKeptOf: []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue(testBackoff)
			for _, rf := range tc.refusals {
				q.Refuse("m", rf.pool, rf.message, testNow.Add(rf.at))
			}
			q.Refuse("other", "a", "not about m", testNow.Add(tc.now)) // another Machine's refusal changes nothing for m
			now := testNow.Add(tc.now)

			var want map[string]time.Time
			for pool, d := range tc.wantUntil {
				if want == nil {
					want = map[string]time.Time{}
				}
				want[pool] = testNow.Add(d)
			}
			excluded := q.ExcludedUntil("m")
			if !reflect.DeepEqual(excluded, want) {
				t.Errorf("ExcludedUntil = %v, want %v", excluded, want)
			}
			if got := q.RetryAfter("m", now); got != tc.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", got, tc.wantRetry)
			}
			if got := q.RefusalText("m"); got != tc.wantText {
				t.Errorf("RefusalText = %q, want %q", got, tc.wantText)
			}
			r := request(smallClass())
			r.ExcludedUntil = excluded
			var kept []string
			for _, name := range []string{"a", "b"} {
				p := newPool(name).build()
				p.HeartbeatExpiry = now.Add(time.Minute)
				if Fits(p, r, now).Code == ReasonRefusedRecently {
					kept = append(kept, name)
				}
			}
			if !reflect.DeepEqual(kept, tc.wantKeptOf) {
				t.Errorf("pools kept off at now: %v, want %v", kept, tc.wantKeptOf)
			}
		})
	}
}

func TestQueueExcludedUntilIsTheCallers(t *testing.T) {
	q := NewQueue(testBackoff)
	q.Refuse("m", "a", "", testNow)
	got := q.ExcludedUntil("m")
	got["a"], got["b"] = testNow, testNow
	if again := q.ExcludedUntil("m"); len(again) != 1 || !again["a"].Equal(testNow.Add(testBackoff)) {
		t.Fatalf("changing the returned map changed the queue: %v", again)
	}
}

func TestQueuePendingAndForget(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	cases := []struct {
		name string
		do   func(q *Queue)
		want []string
	}{
		{"empty", func(*Queue) {}, nil},
		{"set twice counts once", func(q *Queue) {
			q.SetPending(key("a"), true)
			q.SetPending(key("a"), true)
		}, []string{"a"}},
		{"unset", func(q *Queue) {
			q.SetPending(key("a"), true)
			q.SetPending(key("b"), true)
			q.SetPending(key("a"), false)
		}, []string{"b"}},
		{"unset what never waited", func(q *Queue) { q.SetPending(key("a"), false) }, nil},
		{"forget", func(q *Queue) {
			q.SetPending(key("a"), true)
			q.SetPending(key("b"), true)
			q.Forget(key("a"), "uid-a")
		}, []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue(testBackoff)
			tc.do(q)
			var got []string
			for _, k := range q.Pending() {
				got = append(got, k.Name)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Pending = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueueForgetDropsOnlyThatMachinesRefusals(t *testing.T) {
	q := NewQueue(testBackoff)
	q.Refuse("old", "a", "no capacity", testNow)
	q.Refuse("other", "a", "no capacity", testNow)
	// The Machine is deleted; one of the same name is created, with another UID.
	q.Forget(types.NamespacedName{Namespace: "ns", Name: "m"}, "old")
	if got := q.ExcludedUntil("old"); got != nil {
		t.Errorf("ExcludedUntil after Forget = %v, want none", got)
	}
	if got := q.RefusalText("old"); got != "" {
		t.Errorf("RefusalText after Forget = %q, want none", got)
	}
	if got := q.RetryAfter("old", testNow); got != 0 {
		t.Errorf("RetryAfter after Forget = %v, want 0", got)
	}
	if got := q.ExcludedUntil("other"); len(got) != 1 {
		t.Errorf("another Machine's refusals = %v, want kept", got)
	}
}

func TestQueuePoolChangedEndsOnlyThatPoolsRefusals(t *testing.T) {
	q := NewQueue(testBackoff)
	q.Refuse("m1", "metal", "no Host matches hostSelector", testNow)
	q.Refuse("m1", "qemu", "no capacity", testNow)
	q.Refuse("m2", "metal", "no Host matches hostSelector", testNow)
	q.PoolChanged("metal") // a Host was inspected: the metal pool's capacity grew
	if got := q.ExcludedUntil("m1"); len(got) != 1 || got["qemu"].IsZero() {
		t.Errorf("m1's exclusions after metal changed = %v, want only qemu's", got)
	}
	if got := q.ExcludedUntil("m2"); got != nil {
		t.Errorf("m2's exclusions after metal changed = %v, want none", got)
	}
	if got := q.RetryAfter("m2", testNow); got != 0 {
		t.Errorf("m2 RetryAfter = %v, want 0: nothing keeps it waiting", got)
	}
	if got := q.RefusalText("m1"); got != "no capacity" {
		t.Errorf("m1's refusal text = %q, want only the pool still refusing", got)
	}
	q.PoolChanged("unknown") // no refusals: nothing to do, no panic
}

// Safety and liveness of the backoff, over any sequence of refusals, waits, deletions and
// passing time: a pool is kept off a Machine exactly while less than the backoff has
// passed since it last refused it, and a Machine kept off some pool is looked at again
// when the first such backoff ends, never later.
func TestPropertyRefusedPoolIsKeptOffForTheBackoffThenTriedAgain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := NewQueue(testBackoff)
		now := testNow
		machines := []types.UID{"m0", "m1", "m2"}
		pools := []string{"a", "b", "c"}
		key := func(uid types.UID) types.NamespacedName {
			return types.NamespacedName{Namespace: "ns", Name: string(uid)}
		}
		lastRefused := map[types.UID]map[string]time.Time{} // the model
		pending := map[types.NamespacedName]bool{}

		t.Repeat(map[string]func(*rapid.T){
			"refuse": func(t *rapid.T) {
				uid, pool := rapid.SampledFrom(machines).Draw(t, "uid"), rapid.SampledFrom(pools).Draw(t, "pool")
				q.Refuse(uid, pool, fmt.Sprintf("%s refused %s", pool, uid), now)
				if lastRefused[uid] == nil {
					lastRefused[uid] = map[string]time.Time{}
				}
				lastRefused[uid][pool] = now
			},
			"wait": func(t *rapid.T) {
				k, p := key(rapid.SampledFrom(machines).Draw(t, "uid")), rapid.Bool().Draw(t, "pending")
				q.SetPending(k, p)
				if p {
					pending[k] = true
				} else {
					delete(pending, k)
				}
			},
			"delete": func(t *rapid.T) {
				uid := rapid.SampledFrom(machines).Draw(t, "uid")
				q.Forget(key(uid), uid)
				delete(lastRefused, uid)
				delete(pending, key(uid))
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "seconds")) * time.Second)
			},
			"": func(t *rapid.T) {
				got := map[types.NamespacedName]bool{}
				for _, k := range q.Pending() {
					got[k] = true
				}
				if !reflect.DeepEqual(got, pending) {
					t.Fatalf("Pending = %v, want %v", got, pending)
				}
				for _, uid := range machines {
					r := request(smallClass())
					r.ExcludedUntil = q.ExcludedUntil(uid)
					var firstEnd time.Duration
					for _, name := range pools {
						p := newPool(name).build()
						p.HeartbeatExpiry = now.Add(time.Minute)
						at, refused := lastRefused[uid][name]
						running := refused && now.Sub(at) < testBackoff
						if kept := Fits(p, r, now).Code == ReasonRefusedRecently; kept != running {
							t.Fatalf("%s kept off %s: %v; refused %v, %v ago, backoff %v", uid, name, kept, refused, now.Sub(at), testBackoff)
						}
						if left := at.Add(testBackoff).Sub(now); running && (firstEnd == 0 || left < firstEnd) {
							firstEnd = left
						}
					}
					if got := q.RetryAfter(uid, now); got != firstEnd {
						t.Fatalf("RetryAfter(%s) = %v, want %v, when the first running backoff ends", uid, got, firstEnd)
					}
				}
			},
		})
	})
}
