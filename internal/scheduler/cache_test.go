package scheduler

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func newTestCache() *Cache {
	c := NewCache()
	small := smallClass()
	c.SetClass(small.Name, small.Demand, small.Architectures)
	return c
}

func TestCacheChargesEachMachineOnce(t *testing.T) {
	c := newTestCache()
	c.SetPool(*newPool("p").classes(c.ClassIndex("small")).build())
	c.SetHeartbeat("p", testNow.Add(60e9))
	r := request(c.Class("small"))

	d := c.ScheduleAndAssume("m1", r, testNow, StrategySpread)
	if d.Pool == nil || d.Pool.Name != "p" {
		t.Fatalf("decision %+v", d)
	}
	// The informer later shows the same Machine bound: no second charge.
	c.Observe("m1", "p", "small")
	c.Observe("m1", "p", "small")
	p, _ := c.Pool("p")
	if p.Used().MilliCPU != 1000 || p.Used().Memory != 2*gi {
		t.Fatalf("used %+v after one Machine observed three times, want one small", p.Used())
	}
	c.Forget("m1")
	c.Forget("m1")
	if p, _ := c.Pool("p"); p.Used().MilliCPU != 0 || p.Used().Memory != 0 {
		t.Fatalf("used %+v after forgetting, want zero", p.Used())
	}
}

func TestCacheCountsMachinesSeenBeforeTheirPoolOrClass(t *testing.T) {
	c := NewCache()
	c.Observe("m1", "p", "small") // neither pool nor class known yet
	c.SetPool(*newPool("p").build())
	if p, _ := c.Pool("p"); p.Used().MilliCPU != 0 {
		t.Fatalf("charged %+v before the class is known", p.Used())
	}
	small := smallClass()
	c.SetClass("small", small.Demand, small.Architectures)
	if p, _ := c.Pool("p"); p.Used().MilliCPU != 1000 {
		t.Fatalf("used %+v once the class is known, want 1 cpu", p.Used())
	}
	// Replacing the pool (a status update) keeps its charges.
	c.SetPool(*newPool("p").alloc(4000, 8*gi).build())
	if p, _ := c.Pool("p"); p.Used().MilliCPU != 1000 || p.Allocatable.MilliCPU != 4000 {
		t.Fatalf("pool after update: used %+v alloc %+v", p.Used(), p.Allocatable)
	}
	// A pool removed and added again is recounted from its charges.
	c.RemovePool("p")
	c.SetPool(*newPool("p").build())
	if p, _ := c.Pool("p"); p.Used().MilliCPU != 1000 {
		t.Fatalf("used %+v after the pool came back, want 1 cpu", p.Used())
	}
}

func TestCacheMovesChargeWhenMachineMoves(t *testing.T) {
	c := newTestCache()
	c.SetPool(*newPool("a").build())
	c.SetPool(*newPool("b").build())
	c.Observe(types.UID("m"), "a", "small")
	c.Observe(types.UID("m"), "b", "small")
	a, _ := c.Pool("a")
	b, _ := c.Pool("b")
	if a.Used().MilliCPU != 0 || b.Used().MilliCPU != 1000 {
		t.Fatalf("a used %+v, b used %+v; want the charge on b only", a.Used(), b.Used())
	}
	if pool, ok := c.ChargedPool("m"); !ok || pool != "b" {
		t.Fatalf("ChargedPool = %q, %v", pool, ok)
	}
}

func TestCacheHeartbeatBeforePool(t *testing.T) {
	c := newTestCache()
	c.SetHeartbeat("p", testNow.Add(60e9))
	c.SetPool(*newPool("p").expired().build())
	if d := c.ScheduleAndAssume("m", request(c.Class("small")), testNow, StrategySpread); d.Pool == nil {
		t.Fatalf("a heartbeat recorded before its pool was ignored: %s", d.Rejections.Summary())
	}
}
