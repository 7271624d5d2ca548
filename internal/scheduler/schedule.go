package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Strategy says which of the pools that fit wins.
type Strategy uint8

const (
	// StrategyUnspecified is invalid, so a forgotten setting is caught, not guessed.
	StrategyUnspecified Strategy = iota
	// StrategySpread picks the pool with the most free cpu and memory after placement.
	StrategySpread
	// StrategyPack picks the pool with the least, filling pools one by one.
	StrategyPack
)

// ParseStrategy reads "spread" or "pack".
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "spread":
		return StrategySpread, nil
	case "pack":
		return StrategyPack, nil
	}
	return StrategyUnspecified, fmt.Errorf("unknown scheduling strategy %q: use spread or pack", s)
}

// Decision is where a Machine goes, or why it goes nowhere.
type Decision struct {
	// Pool is nil when no pool fits.
	Pool *Pool
	// Rejections counts, per reason, the pools turned down; set only when Pool is nil.
	Rejections Rejections
	// Waiting, when no pool fits: there is no pool yet, or one that is starting
	// (Pool.Starting) may still take the Machine.
	Waiting bool
	// WaitUntil is when the last such pool stops counting as starting (zero: none).
	WaitUntil time.Time
}

// Schedule picks a pool for r among pools, which must be sorted by name. Among the pools
// that fit, the fewest untolerated PreferNoSchedule taints win, then the strategy's score;
// among equally good pools the first by name wins, so the same inputs always give the
// same answer.
func Schedule(pools []*Pool, r *Request, now time.Time, s Strategy) Decision {
	var best *Pool
	var bestAvoid int
	var bestScore float64
	for _, p := range pools {
		if Fits(p, r, now).Code != ReasonNone {
			continue
		}
		avoid := untoleratedPreferences(p, r)
		score := freeAfter(p, r)
		if s == StrategyPack {
			score = -score
		}
		if best == nil || avoid < bestAvoid || (avoid == bestAvoid && score > bestScore) {
			best, bestAvoid, bestScore = p, avoid, score
		}
	}
	if best != nil {
		return Decision{Pool: best}
	}
	// Nothing fits: a second pass says why, pool by pool. Kept off the common path so a
	// successful decision allocates nothing.
	d := Decision{Rejections: Rejections{Total: len(pools)}, Waiting: len(pools) == 0}
	for _, p := range pools {
		d.Rejections.add(Fits(p, r, now))
		if p.Starting(now) {
			d.Waiting = true
			if p.StartingUntil.After(d.WaitUntil) {
				d.WaitUntil = p.StartingUntil
			}
		}
	}
	return d
}

// untoleratedPreferences counts the pool's PreferNoSchedule taints that r does not
// tolerate. It outranks the strategy rather than weighing against free space: a pool so
// tainted is used only when no pool with fewer such taints fits, which is what the taint
// asks for: an untainted pool with room never loses to an emptier tainted one.
func untoleratedPreferences(p *Pool, r *Request) int {
	n := 0
	for i := range p.Taints {
		t := &p.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !tolerated(t, r.Tolerations) {
			n++
		}
	}
	return n
}

// freeAfter is the fraction of cpu plus the fraction of memory the pool would have left
// after placing r: 2 is an empty pool, 0 a full one.
func freeAfter(p *Pool, r *Request) float64 {
	var f float64
	if a := p.Allocatable.MilliCPU; a > 0 {
		f += float64(a-p.used.MilliCPU-r.Class.Demand.MilliCPU) / float64(a)
	}
	if a := p.Allocatable.Memory; a > 0 {
		f += float64(a-p.used.Memory-r.Class.Demand.Memory) / float64(a)
	}
	return f
}

// Rejections counts pools per reason.
type Rejections struct {
	Total int
	// counts is keyed by the reason's text, so equal taints on different pools add up.
	counts map[string]int
}

func (rj *Rejections) add(r Reason) {
	if rj.counts == nil {
		rj.counts = map[string]int{}
	}
	rj.counts[r.String()]++
}

// Count is how many pools were turned down for r.
func (rj Rejections) Count(r Reason) int { return rj.counts[r.String()] }

// Summary says why no pool fits, most common reason first:
// "3 pools: insufficient memory; 2 pools: untolerated taint dedicated=db:NoSchedule".
func (rj Rejections) Summary() string {
	if rj.Total == 0 {
		return "no MachinePools exist"
	}
	type entry struct {
		text  string
		count int
	}
	entries := make([]entry, 0, len(rj.counts))
	for text, n := range rj.counts {
		entries = append(entries, entry{text, n})
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].count != entries[j].count {
			return entries[i].count > entries[j].count
		}
		return entries[i].text < entries[j].text
	})
	parts := make([]string, len(entries))
	for i, e := range entries {
		unit := "pools"
		if e.count == 1 {
			unit = "pool"
		}
		parts[i] = fmt.Sprintf("%d %s: %s", e.count, unit, e.text)
	}
	return strings.Join(parts, "; ")
}
