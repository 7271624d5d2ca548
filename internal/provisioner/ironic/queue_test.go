package ironic

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestQueueFIFO(t *testing.T) {
	now := time.Unix(0, 0)
	q := newQueue("deploy", 2, stDeploying, stDeployWait)
	for _, n := range []string{"a", "b"} {
		if ok, _ := q.admit(n, now); !ok {
			t.Fatalf("%s not admitted with free slots", n)
		}
		q.started(n)
	}
	if ok, ahead := q.admit("c", now); ok || ahead != 0 {
		t.Fatalf("c admitted beyond the limit (ahead %d)", ahead)
	}
	if ok, ahead := q.admit("d", now); ok || ahead != 1 {
		t.Fatalf("d: ok %v ahead %d, want queued behind c", ok, ahead)
	}
	if ok, _ := q.admit("a", now); !ok {
		t.Fatal("a holder asking again is refused")
	}
	q.started("a")
	// a still deploying: nothing freed.
	if next := q.observe("a", stDeploying, "active"); next != nil {
		t.Fatalf("a's slot freed while deploying: %v", next)
	}
	next := q.observe("a", stActive, "")
	if !slices.Equal(next, []string{"c"}) {
		t.Fatalf("freed slot woke %v, want [c]", next)
	}
	if ok, _ := q.admit("d", now); ok {
		t.Fatal("d overtook c")
	}
	if ok, _ := q.admit("c", now); !ok {
		t.Fatal("c not admitted into the freed slot")
	}
	// A waiter that stopped asking does not block those behind it for ever.
	q.started("c")
	q.observe("b", stActive, "")
	if ok, _ := q.admit("e", now.Add(time.Second)); ok {
		t.Fatal("e overtook d while d is fresh")
	}
	if ok, _ := q.admit("e", now.Add(staleAfter+time.Second)); !ok {
		t.Fatal("a stale d still blocks e")
	}
}

func TestQueuePendingNotFreed(t *testing.T) {
	q := newQueue("clean", 1, stCleaning)
	q.admit("a", time.Now())
	if q.observe("a", stManageable, "") != nil || len(q.inflightNames(time.Now())) != 0 {
		t.Fatal("a pending slot was freed, or offered to the background check")
	}
	if n, _ := q.counts(); n != 1 {
		t.Fatalf("in flight %d, want 1", n)
	}
	q.started("a")
	q.observe("a", stManageable, "")
	if n, _ := q.counts(); n != 0 {
		t.Fatal("a started node seen back in its old state kept its slot")
	}
}

// Safety: never more in flight than max; liveness: once nodes finish, every waiter that
// keeps asking gets in.
func TestQueueProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 4).Draw(t, "max")
		q := newQueue("deploy", max, stDeploying)
		now := time.Unix(0, 0)
		names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-h]`), 1, 8, rapid.ID[string]).Draw(t, "names")
		steps := rapid.SliceOfN(rapid.IntRange(0, 2*len(names)-1), 1, 60).Draw(t, "steps")
		for _, s := range steps {
			now = now.Add(time.Second)
			n := names[s%len(names)]
			if s < len(names) {
				if ok, _ := q.admit(n, now); ok {
					q.started(n)
				}
			} else {
				q.observe(n, stActive, "")
			}
			if in, _ := q.counts(); in > max {
				t.Fatalf("%d in flight, max %d", in, max)
			}
		}
		for _, n := range names {
			q.observe(n, stActive, "")
		}
		done := map[string]bool{}
		for round := 0; round < len(names); round++ {
			for _, n := range names {
				if done[n] {
					continue
				}
				if ok, _ := q.admit(n, now); ok {
					q.started(n)
					q.observe(n, stActive, "")
					done[n] = true
				}
			}
		}
		if _, waiting := q.counts(); waiting != 0 {
			t.Fatal(fmt.Sprintf("%d still waiting after everyone finished", waiting))
		}
	})
}
