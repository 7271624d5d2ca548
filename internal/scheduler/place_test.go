package scheduler

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Place charges the fitting pool and settles the Machine; with none fitting it says why
// (the reasons, then what refusing runtimes said) and when a refusal ends, and keeps the
// Machine waiting. A pool that refused the Machine is kept off it.
func TestPlace(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	setup := func() (*Cache, *Queue) {
		c := newTestCache()
		c.SetPool(*newPool("p").classes(c.ClassIndex("small")).build())
		c.SetHeartbeat("p", testNow.Add(time.Minute))
		return c, NewQueue(30 * time.Second)
	}

	c, q := setup()
	q.SetPending(key, true) // it waited before
	p := Place(c, q, key, "m1", request(c.Class("small")), testNow, StrategySpread)
	if p.Pool != "p" || p.Message != "" || p.RetryAfter != 0 {
		t.Fatalf("a fitting pool: %+v", p)
	}
	if pool, ok := c.ChargedPool("m1"); !ok || pool != "p" {
		t.Errorf("charged to %q (%v), want p at once", pool, ok)
	}
	if len(q.Pending()) != 0 {
		t.Errorf("placed but still waiting: %v", q.Pending())
	}

	c, q = setup()
	q.Refuse("m1", "p", "no Host a HostPolicy allows", testNow.Add(-10*time.Second))
	p = Place(c, q, key, "m1", request(c.Class("small")), testNow, StrategySpread)
	if p.Pool != "" || p.RetryAfter != 20*time.Second {
		t.Fatalf("the only pool refused it 10 s ago (backoff 30 s): %+v", p)
	}
	for _, want := range []string{"no MachinePool fits: ", "1 pool: runtime refused this Machine recently", "(no Host a HostPolicy allows)"} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("message %q lacks %q", p.Message, want)
		}
	}
	if _, ok := c.ChargedPool("m1"); ok {
		t.Error("charged with no pool fitting")
	}
	if got := q.Pending(); len(got) != 1 || got[0] != key {
		t.Errorf("waiting %v, want %v", got, key)
	}
	// Past the backoff, the pool is tried again.
	c.SetHeartbeat("p", testNow.Add(2*time.Minute))
	if p := Place(c, q, key, "m1", request(c.Class("small")), testNow.Add(time.Minute), StrategySpread); p.Pool != "p" {
		t.Errorf("after the backoff: %+v", p)
	}
}

// A pool that has not reported yet may take the Machine once it does: with none fitting,
// the Machine waits for it (no news to tell), and looks again at the latest when the pool
// stops counting as starting. With no pool at all it waits too. Pools that reported and
// turn it down make it plainly unschedulable.
func TestPlaceWaitsForStartingPools(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	for _, tc := range []struct {
		name    string
		pools   func(c *Cache)
		waiting bool
		retry   time.Duration
		message string
	}{
		{name: "no pool yet", pools: func(*Cache) {}, waiting: true, message: "waiting for MachinePools: none exists yet"},
		{name: "a pool that reported turns it down", pools: func(c *Cache) {
			c.SetPool(*newPool("a").classes().build())
		}, message: "no MachinePool fits: 1 pool: MachineClass not supported"},
		{name: "a pool starting beside it", pools: func(c *Cache) {
			c.SetPool(*newPool("a").classes().build())
			starting := newPool("b").notReady().build()
			starting.StartingUntil = testNow.Add(90 * time.Second)
			c.SetPool(*starting)
		}, waiting: true, retry: 90 * time.Second, message: "waiting for MachinePools to report: no MachinePool fits: "},
		{name: "a pool that reported, before its first Lease", pools: func(c *Cache) {
			starting := newPool("c").classes().build()
			starting.Reported, starting.StartingUntil = true, testNow.Add(time.Minute)
			c.SetPool(*starting)
		}, waiting: true, retry: time.Minute, message: "waiting for MachinePools to report: no MachinePool fits: "},
		{name: "a pool that reported nothing to offer yet (servers being inspected)", pools: func(c *Cache) {
			empty := newPool("a").classes().alloc(0, 0).build()
			empty.Reported, empty.StartingUntil = true, testNow.Add(time.Minute)
			c.SetPool(*empty)
		}, waiting: true, retry: time.Minute, message: "waiting for MachinePools to report: no MachinePool fits: "},
		{name: "a pool with something to offer, in its first minutes", pools: func(c *Cache) {
			young := newPool("a").classes().build()
			young.Reported, young.StartingUntil = true, testNow.Add(time.Minute)
			c.SetPool(*young)
		}, message: "no MachinePool fits: 1 pool: MachineClass not supported"},
		{name: "a pool past its start", pools: func(c *Cache) {
			starting := newPool("b").notReady().build()
			starting.StartingUntil = testNow
			c.SetPool(*starting)
		}, message: "no MachinePool fits: 1 pool: pool not Ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, q := newTestCache(), NewQueue(30*time.Second)
			small := c.Class("small")
			tc.pools(c)
			for _, p := range []string{"a", "b"} {
				c.SetHeartbeat(p, testNow.Add(time.Hour))
			}
			p := Place(c, q, key, "m1", request(small), testNow, StrategySpread)
			if p.Pool != "" || p.Waiting != tc.waiting || p.RetryAfter != tc.retry || !strings.HasPrefix(p.Message, tc.message) {
				t.Fatalf("%+v; want waiting %v, retry %v, message starting %q", p, tc.waiting, tc.retry, tc.message)
			}
			if got := q.Pending(); len(got) != 1 {
				t.Errorf("waiting Machines %v, want this one (a pool's report wakes it)", got)
			}
		})
	}
}
