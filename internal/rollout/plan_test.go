package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"pgregory.net/rapid"
)

const target = "sha256:new"

func TestDecide(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	pending := func(name, pool string) Machine { return Machine{Name: name, Pool: pool, Available: true} }
	updated := func(name, pool string) Machine {
		return Machine{Name: name, Pool: pool, Available: true, Current: true, Asked: target, AskedAt: now.Add(-time.Minute)}
	}
	updating := func(name, pool string) Machine {
		return Machine{Name: name, Pool: pool, Asked: target, AskedAt: now.Add(-time.Minute)}
	}
	for _, tc := range []struct {
		name     string
		machines []Machine
		max      intstr.IntOrString
		paused   bool
		ask      string
		counts   string // updated/updating/pending once the asks are made
		stalled  string
	}{
		{"one at a time", []Machine{pending("a", "p"), pending("b", "p"), pending("c", "p")}, intstr.FromInt32(1), false, "a", "0/1/2", ""},
		{"the next once the first is back", []Machine{updated("a", "p"), pending("b", "p"), pending("c", "p")}, intstr.FromInt32(1), false, "b", "1/1/1", ""},
		{"none while one is away", []Machine{updating("a", "p"), pending("b", "p")}, intstr.FromInt32(1), false, "", "0/1/1", ""},
		{"a machine down for another reason counts", []Machine{{Name: "a", Pool: "p"}, pending("b", "p")}, intstr.FromInt32(1), false, "", "0/0/2", ""},
		{"per pool", []Machine{pending("a", "p1"), pending("b", "p1"), pending("c", "p2")}, intstr.FromInt32(1), false, "a c", "0/2/1", ""},
		{"10% of 20 is 2", machines(20, "p"), intstr.FromString("10%"), false, "m00 m01", "0/2/18", ""},
		{"10% of 5 rounds down to 0, at least 1", machines(5, "p"), intstr.FromString("10%"), false, "m00", "0/1/4", ""},
		{"already current: nothing to do", []Machine{{Name: "a", Pool: "p", Available: true, Current: true}}, intstr.FromInt32(1), false, "", "1/0/0", ""},
		{"paused", []Machine{pending("a", "p")}, intstr.FromInt32(1), true, "", "0/0/1", ""},
		{"refused stops everything", []Machine{{Name: "a", Pool: "p", Available: true, Asked: target, AskedAt: now, Refused: "IMAGE_NOT_FOUND"}, pending("b", "p2")},
			intstr.FromInt32(5), false, "", "0/1/1", "Machine a: its pool refused the new image: IMAGE_NOT_FOUND"},
		{"past the deadline stops everything", []Machine{{Name: "a", Pool: "p", Asked: target, AskedAt: now.Add(-time.Hour)}, pending("b", "p2")},
			intstr.FromInt32(5), false, "", "0/1/1", "Machine a did not come back running the new image within 10m0s"},
		{"asked for an older target: asked again", []Machine{{Name: "a", Pool: "p", Available: true, Asked: "sha256:old", AskedAt: now.Add(-time.Hour)}}, intstr.FromInt32(1), false, "a", "0/1/0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decide(Input{Target: target, Machines: tc.machines, MaxUnavailable: tc.max, Paused: tc.paused, Deadline: 10 * time.Minute, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(p.Ask, " "); got != tc.ask {
				t.Errorf("ask %q, want %q", got, tc.ask)
			}
			if got := fmt.Sprintf("%d/%d/%d", p.Updated, p.Updating, p.Pending); got != tc.counts {
				t.Errorf("updated/updating/pending %s, want %s", got, tc.counts)
			}
			if p.Stalled != tc.stalled {
				t.Errorf("stalled %q, want %q", p.Stalled, tc.stalled)
			}
		})
	}
	if _, err := Decide(Input{Target: target, Machines: machines(1, "p"), MaxUnavailable: intstr.FromString("ten")}); err == nil {
		t.Error("maxUnavailable \"ten\" decided, want an error")
	}
	if _, err := Decide(Input{Target: target, Machines: machines(1, "p"), MaxUnavailable: intstr.FromInt32(0)}); err == nil {
		t.Error("maxUnavailable 0 decided, want an error")
	}
}

// The first deadline of the Machines under way is when to look again; none under way, none.
func TestDecideRecheckAt(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	in := Input{Target: target, MaxUnavailable: intstr.FromInt32(5), Deadline: 10 * time.Minute, Now: now, Machines: []Machine{
		{Name: "a", Pool: "p", Asked: target, AskedAt: now.Add(-2 * time.Minute)},
		{Name: "b", Pool: "p", Asked: target, AskedAt: now.Add(-7 * time.Minute)},
		{Name: "c", Pool: "p", Available: true, Current: true, Asked: target, AskedAt: now.Add(-9 * time.Minute)},
	}}
	p, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(3 * time.Minute); !p.RecheckAt.Equal(want) {
		t.Errorf("recheck at %s, want %s (b's deadline; c is back)", p.RecheckAt, want)
	}
	in.Machines = machines(3, "p")
	if p, _ := Decide(in); len(p.Ask) != 3 || !p.RecheckAt.Equal(now.Add(10*time.Minute)) {
		t.Errorf("asked %v, recheck at %s; want all three asked now and a recheck at their deadline", p.Ask, p.RecheckAt)
	}
	in.Paused = true
	if p, _ := Decide(in); !p.RecheckAt.IsZero() {
		t.Errorf("recheck at %s with nothing under way (paused), want none", p.RecheckAt)
	}
}

func TestCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plan   Plan
		paused bool
		want   string // status reason: message start
	}{
		{"under way", Plan{Machines: 3, Updated: 1, Updating: 1, Pending: 1}, false, "true RollingOut: 1 of 3 Machines on index sha256:new, 1 updating, 1 pending"},
		{"paused", Plan{Machines: 3, Updated: 1, Updating: 1, Pending: 1}, true, "false Paused: paused (spec.rollout.paused) with 1 of 3"},
		{"complete even when paused", Plan{Machines: 3, Updated: 3}, true, "false Complete: all 3 Machines booting the tag run index sha256:new"},
		{"no Machine", Plan{}, false, "false Complete: all 0 Machines"},
		{"stalled first", Plan{Machines: 3, Updated: 1, Updating: 2, Stalled: "Machine a did not come back"}, true,
			"false Stalled: stalled on index sha256:new with 1 of 3 Machines on it: Machine a did not come back; nothing more is asked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg := tc.plan.Condition(target, tc.paused)
			if got := fmt.Sprintf("%t %s: %s", status, reason, msg); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start %q", got, tc.want)
			}
		})
	}
}

func machines(n int, pool string) []Machine {
	var out []Machine
	for i := range n {
		out = append(out, Machine{Name: fmt.Sprintf("m%02d", i), Pool: pool, Available: true})
	}
	return out
}

// Safety: a wave never takes a pool past its limit (counting what is already down), and
// asks only Machines that run, are behind and were not asked. Liveness: when nothing
// stalls or pauses it, a pool with room and a Machine waiting gets one asked.
func TestDecideProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Unix(1_000_000, 0)
		var ms []Machine
		for i, n := 0, rapid.IntRange(0, 30).Draw(t, "n"); i < n; i++ {
			m := Machine{Name: fmt.Sprint("m", i), Pool: fmt.Sprint("p", rapid.IntRange(0, 3).Draw(t, "pool")),
				Current: rapid.Bool().Draw(t, "current"), Available: rapid.Bool().Draw(t, "available")}
			if rapid.Bool().Draw(t, "asked") {
				m.Asked = rapid.SampledFrom([]string{target, "sha256:old"}).Draw(t, "askedFor")
				m.AskedAt = now.Add(-time.Duration(rapid.IntRange(0, 20).Draw(t, "minutes")) * time.Minute)
			}
			ms = append(ms, m)
		}
		max := intstr.FromInt32(int32(rapid.IntRange(1, 5).Draw(t, "max")))
		if rapid.Bool().Draw(t, "percent") {
			max = intstr.FromString(fmt.Sprintf("%d%%", rapid.IntRange(1, 100).Draw(t, "pct")))
		}
		in := Input{Target: target, Machines: ms, MaxUnavailable: max, Deadline: 10 * time.Minute, Now: now}
		p, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.Machines != len(ms) || p.Updated+p.Updating+p.Pending != len(ms) {
			t.Fatalf("%d Machines counted %d: %d updated, %d updating, %d pending", len(ms), p.Machines, p.Updated, p.Updating, p.Pending)
		}
		asked := map[string]bool{}
		for _, n := range p.Ask {
			asked[n] = true
		}
		perPool := map[string][]Machine{}
		for _, m := range ms {
			perPool[m.Pool] = append(perPool[m.Pool], m)
			if asked[m.Name] && (m.Current || !m.Available || m.Asked == target) {
				t.Fatalf("asked %+v, which is current, down or asked already", m)
			}
		}
		for pool, pms := range perPool {
			limit, _ := maxUnavailable(max, len(pms))
			down, newly, waiting := 0, 0, 0
			for _, m := range pms {
				if !m.Available || m.Asked == target && !m.Current {
					down++
				}
				if asked[m.Name] {
					newly++
				}
				if m.Available && !m.Current && m.Asked != target {
					waiting++
				}
			}
			if newly > 0 && down+newly > limit {
				t.Fatalf("pool %s: %d down and %d asked, past its limit %d", pool, down, newly, limit)
			}
			if p.Stalled == "" && newly == 0 && waiting > 0 && down < limit {
				t.Fatalf("pool %s: room for %d and %d waiting, none asked", pool, limit-down, waiting)
			}
		}
		// The counts are the state once the asks are made: deciding again on it counts the
		// same and asks no one more (the shell writes them as they are).
		after := make([]Machine, len(ms))
		for i, m := range ms {
			if asked[m.Name] {
				m.Asked, m.AskedAt = target, now
			}
			after[i] = m
		}
		again, err := Decide(Input{Target: target, Machines: after, MaxUnavailable: max, Deadline: in.Deadline, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if again.Updated != p.Updated || again.Updating != p.Updating || again.Pending != p.Pending || len(again.Ask) != 0 {
			t.Fatalf("plan %d/%d/%d asking %v; once asked: %d/%d/%d asking %v", p.Updated, p.Updating, p.Pending, p.Ask,
				again.Updated, again.Updating, again.Pending, again.Ask)
		}
		if len(p.Ask) > 0 && p.Stalled == "" && (p.RecheckAt.IsZero() || p.RecheckAt.After(now.Add(in.Deadline))) {
			t.Fatalf("asked %v but rechecks at %v, after their deadline %v", p.Ask, p.RecheckAt, now.Add(in.Deadline))
		}
	})
}
