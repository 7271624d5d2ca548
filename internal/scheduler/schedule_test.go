package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestScheduleSpreadAndPack(t *testing.T) {
	pools := func() []*Pool {
		busy := newPool("a-busy").build()
		busy.used = Resources{MilliCPU: 6000, Memory: 8 * gi}
		return []*Pool{busy, newPool("b-empty").build()}
	}
	if d := Schedule(pools(), request(smallClass()), testNow, StrategySpread); d.Pool == nil || d.Pool.Name != "b-empty" {
		t.Fatalf("spread chose %v, want b-empty", d.Pool)
	}
	if d := Schedule(pools(), request(smallClass()), testNow, StrategyPack); d.Pool == nil || d.Pool.Name != "a-busy" {
		t.Fatalf("pack chose %v, want a-busy", d.Pool)
	}
}

func TestScheduleTieBreaksByName(t *testing.T) {
	pools := []*Pool{newPool("p1").build(), newPool("p2").build(), newPool("p3").build()}
	for _, s := range []Strategy{StrategySpread, StrategyPack} {
		if d := Schedule(pools, request(smallClass()), testNow, s); d.Pool == nil || d.Pool.Name != "p1" {
			t.Fatalf("strategy %d chose %v among equal pools, want p1", s, d.Pool)
		}
	}
}

func TestScheduleSummarisesWhyNothingFits(t *testing.T) {
	pools := []*Pool{
		newPool("a").alloc(8000, gi).build(),
		newPool("b").alloc(8000, gi).build(),
		newPool("c").alloc(8000, gi).build(),
		newPool("d").taint("dedicated", "db", corev1.TaintEffectNoSchedule).build(),
		newPool("e").taint("dedicated", "db", corev1.TaintEffectNoSchedule).build(),
		newPool("f").notReady().build(),
	}
	d := Schedule(pools, request(smallClass()), testNow, StrategySpread)
	if d.Pool != nil {
		t.Fatalf("chose %s, want none", d.Pool.Name)
	}
	want := "3 pools: insufficient memory; 2 pools: untolerated taint dedicated=db:NoSchedule; 1 pool: pool not Ready"
	if got := d.Rejections.Summary(); got != want {
		t.Fatalf("summary\n got %q\nwant %q", got, want)
	}
	if got := (Rejections{}).Summary(); got != "no MachinePools exist" {
		t.Fatalf("empty summary %q", got)
	}
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{"spread": StrategySpread, "pack": StrategyPack} {
		if got, err := ParseStrategy(in); err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseStrategy("random"); err == nil {
		t.Error("ParseStrategy accepted an unknown strategy")
	}
}
