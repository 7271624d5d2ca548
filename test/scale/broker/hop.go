package main

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/scale/measure"
	"github.com/anvil-dev/anvil/test/sites"
)

// The namespaces Machines are created in: in the site (direct), in the region (through
// the broker, whose Machines land in the site's namespace "region").
const (
	directNamespace = "direct"
	tenantNamespace = "tenant"
)

type scenario struct {
	h *sites.Hierarchy
	o options
}

// path is where one side's Machines are created, and every namespace they (or the
// Machines the broker made for them) must be gone from before the next round.
type path struct {
	name      string
	at        *sites.Level
	namespace string
	clear     []place
}

type place struct {
	l         *sites.Level
	namespace string
}

func (s *scenario) region() *sites.Level { return s.h.Levels[0] }
func (s *scenario) site() *sites.Level   { return s.h.Levels[1] }

func (s *scenario) directPath() path {
	return path{name: "direct", at: s.site(), namespace: directNamespace, clear: []place{{s.site(), directNamespace}}}
}

func (s *scenario) hopPath() path {
	return path{name: "hop", at: s.region(), namespace: tenantNamespace,
		clear: []place{{s.region(), tenantNamespace}, {s.site(), s.site().BrokerNamespace}}}
}

// seed creates the namespaces and warms both paths (informers, connections, the image's
// index in every reader's cache) with one Machine each, run and deleted.
func (s *scenario) seed(ctx context.Context) error {
	for _, p := range []path{s.directPath(), s.hopPath()} {
		if err := client.IgnoreAlreadyExists(p.at.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}})); err != nil {
			return err
		}
		w, err := measure.StartWatch(ctx, p.at.Client, p.namespace, func() client.ObjectList { return &computev1alpha1.MachineList{} }, running)
		if err != nil {
			return err
		}
		if err := p.at.Client.Create(ctx, s.h.Machine(p.namespace, "warm-up")); err != nil {
			return err
		}
		if _, err := w.Wait(ctx, 1, 2*time.Minute); err != nil {
			return fmt.Errorf("warming up %s: %w", p.name, err)
		}
		if err := s.clear(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// round creates the Machines of one round on p and returns the seconds from the first
// create to the last Running seen, and when the Machines passed each phase at each level
// of p; then it deletes them all.
func (s *scenario) round(ctx context.Context, p path, r int) (float64, map[string]phaseTimes, measures, error) {
	w, err := measure.StartWatch(ctx, p.at.Client, p.namespace, func() client.ObjectList { return &computev1alpha1.MachineList{} }, running)
	if err != nil {
		return 0, nil, measures{}, err
	}
	defer w.Stop()
	var trackers []*tracker
	for _, pl := range p.clear {
		t, err := track(ctx, pl.l, pl.namespace)
		if err != nil {
			return 0, nil, measures{}, err
		}
		trackers = append(trackers, t)
	}
	before, err := s.h.CPU()
	if err != nil {
		return 0, nil, measures{}, err
	}
	var requestsBefore []map[string]float64
	for _, l := range s.h.Levels {
		c, err := requestCounts(ctx, l)
		if err != nil {
			return 0, nil, measures{}, err
		}
		requestsBefore = append(requestsBefore, c)
	}
	first, _, err := measure.CreateAll(ctx, p.at.Client, s.o.machines, s.o.creators, func(i int) client.Object {
		return s.h.Machine(p.namespace, fmt.Sprintf("r%d-%05d", r, i))
	})
	if err != nil {
		return 0, nil, measures{}, err
	}
	last, err := w.Wait(ctx, s.o.machines, s.o.timeout)
	if err != nil {
		return 0, nil, measures{}, fmt.Errorf("%w: %s", err, summary(ctx, p))
	}
	after, err := s.h.CPU()
	if err != nil {
		return 0, nil, measures{}, err
	}
	cpu := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			cpu[k] = math.Round(d*10) / 10
			cpu["total"] += d
		}
	}
	cpu["total"] = math.Round(cpu["total"]*10) / 10
	requests := map[string]float64{}
	for i, l := range s.h.Levels {
		c, err := requestCounts(ctx, l)
		if err != nil {
			return 0, nil, measures{}, err
		}
		for k, v := range requestsPerMachine(requestsBefore[i], c, s.o.machines) {
			requests[l.Name+": "+k] = v
		}
	}
	phases := map[string]phaseTimes{}
	for _, t := range trackers {
		for k, v := range t.finish(first, s.o.machines) {
			phases[k] = v
		}
	}
	return last.Sub(first).Seconds(), phases, measures{CPU: cpu, Requests: requests}, s.clear(ctx, p)
}

// measures are what one side of a round cost, from the first create to the last Running.
type measures struct {
	// CPU seconds each process used (the machine is shared: wall time is partly the sum
	// of every level's work).
	CPU map[string]float64 `json:"cpuSeconds"`
	// Requests per Machine each level's apiserver served (LIST and WATCH apart).
	Requests map[string]float64 `json:"requestsPerMachine"`
}

func running(obj client.Object) bool { return isRunning(obj.(*computev1alpha1.Machine)) }

// clear deletes p's Machines and waits until none is left anywhere on p.
func (s *scenario) clear(ctx context.Context, p path) error {
	if err := p.at.Client.DeleteAllOf(ctx, &computev1alpha1.Machine{}, client.InNamespace(p.namespace)); err != nil {
		return err
	}
	deadline := time.Now().Add(s.o.timeout)
	for _, pl := range p.clear {
		for {
			ms, err := pl.l.Machines(ctx, pl.namespace)
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d Machines left in %s/%s after %s", len(ms), pl.l.Name, pl.namespace, s.o.timeout)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

// summary counts p's Machines by state and binding, to say where a round got stuck.
func summary(ctx context.Context, p path) string {
	out := ""
	for _, pl := range p.clear {
		ms, err := pl.l.Machines(ctx, pl.namespace)
		if err != nil {
			return err.Error()
		}
		counts := map[string]int{}
		for _, m := range ms {
			key := "state=" + string(m.Status.State)
			if m.Spec.MachinePoolRef == nil {
				key += ",unbound"
			}
			counts[key]++
		}
		out += fmt.Sprintf(" %s/%s %v", pl.l.Name, pl.namespace, counts)
	}
	return out
}
