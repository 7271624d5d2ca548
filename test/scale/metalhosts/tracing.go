package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// tracing wraps the site's provisioner and records every call the Host controller makes,
// to show where anvil's time goes: in Ironic calls, or between reconciles.
type tracing struct {
	provisioner.Provisioner

	mu    sync.Mutex
	calls []call
}

type call struct {
	node, method string
	state        provisioner.State // what a Get answered
	start, end   time.Time
	failed       string // "" or the provisioner error class
}

// errorClass names a provisioner error by the provisioner error it wraps.
func errorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, provisioner.ErrNotFound):
		return "notfound"
	case errors.Is(err, provisioner.ErrBusy):
		return "busy"
	case errors.Is(err, provisioner.ErrWrongState):
		return "wrongstate"
	case errors.Is(err, provisioner.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, provisioner.ErrInvalid):
		return "invalid"
	}
	return "other"
}

func (t *tracing) record(node, method string, start time.Time, err error) {
	t.recordState(node, method, "", start, err)
}

func (t *tracing) recordState(node, method string, st provisioner.State, start time.Time, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, call{node: node, method: method, state: st, start: start, end: time.Now(), failed: errorClass(err)})
}

func (t *tracing) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = nil
}

func (t *tracing) Get(ctx context.Context, name string) (provisioner.Node, error) {
	start := time.Now()
	n, err := t.Provisioner.Get(ctx, name)
	st := n.State
	if err != nil {
		st = "error"
	}
	t.recordState(name, "Get", st, start, err)
	return n, err
}

func (t *tracing) Register(ctx context.Context, r provisioner.Registration) (provisioner.Node, error) {
	start := time.Now()
	n, err := t.Provisioner.Register(ctx, r)
	t.record(r.Name, "Register", start, err)
	return n, err
}

func (t *tracing) Inspect(ctx context.Context, name string) error {
	start := time.Now()
	err := t.Provisioner.Inspect(ctx, name)
	t.record(name, "Inspect", start, err)
	return err
}

func (t *tracing) Hardware(ctx context.Context, name string) (provisioner.Hardware, error) {
	start := time.Now()
	hw, err := t.Provisioner.Hardware(ctx, name)
	t.record(name, "Hardware", start, err)
	return hw, err
}

func (t *tracing) Provide(ctx context.Context, name string) error {
	start := time.Now()
	err := t.Provisioner.Provide(ctx, name)
	t.record(name, "Provide", start, err)
	return err
}

func (t *tracing) Provision(ctx context.Context, name string, d provisioner.Deployment) error {
	start := time.Now()
	err := t.Provisioner.Provision(ctx, name, d)
	t.record(name, "Provision", start, err)
	return err
}

func (t *tracing) Power(ctx context.Context, name string, on bool) error {
	start := time.Now()
	err := t.Provisioner.Power(ctx, name, on)
	t.record(name, "Power", start, err)
	return err
}

// summary is two lines: the calls by method (count, failures, mean and max latency), and
// per node the reconciles (one Get each), the time inside provisioner calls and the
// time between one reconcile's last call and the next one's Get (the requeue wait, the
// status write and the work queue), as medians over the nodes.
func (t *tracing) summary() (calls, gaps, answers string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	type agg struct {
		n        int
		failed   map[string]int
		sum, max time.Duration
	}
	by := map[string]*agg{}
	perNode := map[string][]call{}
	states := map[provisioner.State]int{}
	for _, c := range t.calls {
		if c.method == "Get" {
			states[c.state]++
		}
		a := by[c.method]
		if a == nil {
			a = &agg{failed: map[string]int{}}
			by[c.method] = a
		}
		d := c.end.Sub(c.start)
		a.n++
		a.sum += d
		a.max = max(a.max, d)
		if c.failed != "" {
			a.failed[c.failed]++
		}
		perNode[c.node] = append(perNode[c.node], c)
	}
	var parts []string
	for m, a := range by {
		var fs []string
		for k, v := range a.failed {
			fs = append(fs, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(fs)
		failed := ""
		if len(fs) > 0 {
			failed = " (" + strings.Join(fs, ", ") + ")"
		}
		parts = append(parts, fmt.Sprintf("%s %d%s mean %dms max %dms", m, a.n, failed,
			(a.sum/time.Duration(a.n)).Milliseconds(), a.max.Milliseconds()))
	}
	sort.Strings(parts)
	var reconciles, inCalls, between, gapMedian []float64
	for _, cs := range perNode {
		sort.Slice(cs, func(i, j int) bool { return cs[i].start.Before(cs[j].start) })
		var r int
		var in, gap time.Duration
		var gs []float64
		for i, c := range cs {
			in += c.end.Sub(c.start)
			if c.method == "Get" {
				r++
				if i > 0 {
					g := c.start.Sub(cs[i-1].end)
					gap += g
					gs = append(gs, g.Seconds())
				}
			}
		}
		reconciles = append(reconciles, float64(r))
		inCalls = append(inCalls, in.Seconds())
		between = append(between, gap.Seconds())
		if len(gs) > 0 {
			sort.Float64s(gs)
			gapMedian = append(gapMedian, median(gs))
		}
	}
	gaps = fmt.Sprintf("per node (median over %d): reconciles %.0f, in provisioner calls %.1fs, between reconciles %.1fs (one gap %.2fs)",
		len(perNode), med(reconciles), med(inCalls), med(between), med(gapMedian))
	var as []string
	for st, n := range states {
		as = append(as, fmt.Sprintf("%s %d", st, n))
	}
	sort.Strings(as)
	return strings.Join(parts, ", "), gaps, "reconciles' Get answers: " + strings.Join(as, ", ")
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return median(xs)
}
