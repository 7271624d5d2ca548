package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// phases records when each host first reached each milestone, relative to the start of
// its path, to show where a path's time goes.
type phases struct {
	start time.Time
	order []string // milestones in the order they are printed

	mu   sync.Mutex
	seen map[string]map[string]time.Duration // milestone -> host -> since start
}

func newPhases(start time.Time, order ...string) *phases {
	return &phases{start: start, order: order, seen: map[string]map[string]time.Duration{}}
}

// reached records host at milestone now, unless it was there before.
func (p *phases) reached(milestone, host string) {
	d := time.Since(p.start)
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.seen[milestone]
	if m == nil {
		m = map[string]time.Duration{}
		p.seen[milestone] = m
	}
	if _, ok := m[host]; !ok {
		m[host] = d
	}
}

// String is "milestone p50 Xs max Ys, ..." for the milestones in order.
func (p *phases) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, ms := range p.order {
		var ds []time.Duration
		for _, d := range p.seen[ms] {
			ds = append(ds, d)
		}
		if len(ds) == 0 {
			parts = append(parts, ms+" none")
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		parts = append(parts, fmt.Sprintf("%s p50 %.1fs max %.1fs (%d)", ms, ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(), len(ds)))
	}
	return strings.Join(parts, ", ")
}
