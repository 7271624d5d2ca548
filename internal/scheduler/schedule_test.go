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

func TestSchedulePrefersPoolsWithoutUntoleratedPreferNoScheduleTaints(t *testing.T) {
	soft := func(b *poolBuilder) *poolBuilder {
		return b.taint("maintenance", "soon", corev1.TaintEffectPreferNoSchedule)
	}
	tolerates := func(r *Request) {
		r.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
	}
	// In each case the soft-tainted pool sorts first and wins on free space, so only the
	// taint keeps the Machine off it.
	cases := []struct {
		name     string
		pools    []*Pool
		strategy Strategy
		mutate   func(*Request)
		want     string
	}{
		{"spread avoids the tainted pool", []*Pool{soft(newPool("a")).build(), newPool("b").alloc(4000, 8*gi).build()},
			StrategySpread, nil, "b"},
		{"pack avoids the tainted pool", []*Pool{soft(newPool("a")).alloc(2000, 4*gi).build(), newPool("b").build()},
			StrategyPack, nil, "b"},
		{"equal pools: the untainted one, not the first by name", []*Pool{soft(newPool("a")).build(), newPool("b").build()},
			StrategySpread, nil, "b"},
		{"a tolerated taint is no reason to avoid", []*Pool{soft(newPool("a")).build(), newPool("b").build()},
			StrategySpread, tolerates, "a"},
		{"a hard taint's toleration does not cover it", []*Pool{soft(newPool("a")).build(), newPool("b").build()},
			StrategySpread, func(r *Request) {
				r.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			}, "b"},
		{"the tainted pool when nothing else fits", []*Pool{soft(newPool("a")).build(), newPool("b").alloc(8000, gi).build()},
			StrategySpread, nil, "a"},
		{"fewer untolerated taints win", []*Pool{
			soft(newPool("a")).taint("old-hardware", "", corev1.TaintEffectPreferNoSchedule).build(),
			soft(newPool("b")).alloc(4000, 8*gi).build(),
		}, StrategySpread, nil, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := request(smallClass())
			if tc.mutate != nil {
				tc.mutate(r)
			}
			got := "none"
			if d := Schedule(tc.pools, r, testNow, tc.strategy); d.Pool != nil {
				got = d.Pool.Name
			}
			if got != tc.want {
				t.Fatalf("chose %s, want %s", got, tc.want)
			}
		})
	}
}
