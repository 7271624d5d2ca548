package main

import (
	"context"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/scale/measure"
	"github.com/anvil-dev/anvil/test/sites"
)

// phase is a step every Machine of a round passes, seen at one level.
type phase struct {
	name string
	done func(*computev1alpha1.Machine) bool
}

// phasesOf are the steps watched at each level: created, bound to a pool, Running.
var phasesOf = []phase{
	{"created", func(*computev1alpha1.Machine) bool { return true }},
	{"bound", func(m *computev1alpha1.Machine) bool { return m.Spec.MachinePoolRef != nil }},
	{"running", isRunning},
}

func isRunning(m *computev1alpha1.Machine) bool {
	return m.Status.State == computev1alpha1.MachineStateRunning
}

// tracker records when each Machine of a namespace first passed each phase, to say where
// a round's time went.
type tracker struct {
	level string
	mu    sync.Mutex
	at    map[string]map[string]time.Time // phase → Machine → first seen
	stop  context.CancelFunc
	done  <-chan struct{}
}

// track watches namespace at l from now on, through an informer (measure.Follow): a
// watch the apiserver expires is relisted, not reopened from a resource version it no
// longer has.
func track(ctx context.Context, l *sites.Level, namespace string) (*tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &tracker{level: l.Name + "/" + namespace, at: map[string]map[string]time.Time{}, stop: cancel}
	for _, p := range phasesOf {
		t.at[p.name] = map[string]time.Time{}
	}
	stopped, err := measure.Follow(ctx, l.Client, namespace, func() client.ObjectList { return &computev1alpha1.MachineList{} },
		func(o client.Object, initial bool) {
			m, ok := o.(*computev1alpha1.Machine)
			if !ok || initial {
				return
			}
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			for _, p := range phasesOf {
				if _, seen := t.at[p.name][m.Name]; !seen && p.done(m) {
					t.at[p.name][m.Name] = now
				}
			}
		})
	if err != nil {
		cancel()
		return nil, err
	}
	t.done = stopped
	return t, nil
}

// phaseTimes are, per phase, the seconds from the round's first create until half and
// until all of the Machines had passed it.
type phaseTimes struct {
	Half float64 `json:"halfSeconds"`
	All  float64 `json:"allSeconds"`
}

// finish stops the watch and returns each phase's times, relative to start, for n Machines.
func (t *tracker) finish(start time.Time, n int) map[string]phaseTimes {
	t.stop()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]phaseTimes{}
	for _, p := range phasesOf {
		var ts []float64
		for _, at := range t.at[p.name] {
			ts = append(ts, at.Sub(start).Seconds())
		}
		if len(ts) < n || n == 0 {
			continue
		}
		sort.Float64s(ts)
		out[t.level+" "+p.name] = phaseTimes{Half: ts[n/2], All: ts[n-1]}
	}
	return out
}
