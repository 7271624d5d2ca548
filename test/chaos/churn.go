package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
)

// churn is what users do to Machines during the run: create, power off and on, change
// the image (a reimage) and delete, through the API, retried across an apiserver that
// is down, never waiting for a Machine to get anywhere first.
type churn struct {
	c      client.Client
	images [2]string
	metal  string
	// Counts of what was asked, for the report.
	created, poweredOff, poweredOn, reimaged, deleted atomic.Int64

	mu sync.Mutex
	// boots counts, for each Machine on an emulated server, the boots asked of it: its
	// create, each power-on after a power-off, each reimage.
	boots map[string]int
}

// retryFor retries f while the apiserver cannot be reached or answers a conflict, for up to
// two minutes (an apiserver kill and restart takes seconds).
func retryFor(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// machine is an amd64 Machine of the small class on pool (its chaos label), powered on.
func machine(name, pool, image string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: classSmall},
			Image: image, Power: computev1alpha1.PowerOn, Architecture: computev1alpha1.ArchitectureAMD64,
			MachinePoolSelector: map[string]string{"chaos": pool}},
	}
}

func (ch *churn) create(ctx context.Context, name, pool, image string) error {
	return ch.createMachine(ctx, machine(name, pool, image))
}

func (ch *churn) createMachine(ctx context.Context, m *computev1alpha1.Machine) error {
	err := retryFor(ctx, func() error {
		// A create whose answer was lost to a kill went through: the name says so.
		return client.IgnoreAlreadyExists(ch.c.Create(ctx, m.DeepCopy()))
	})
	if err == nil {
		ch.created.Add(1)
	}
	return err
}

// change applies f to the Machine's spec; a Machine already gone is left alone.
func (ch *churn) change(ctx context.Context, name string, f func(*computev1alpha1.MachineSpec)) error {
	return retryFor(ctx, func() error {
		var m computev1alpha1.Machine
		if err := ch.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &m); err != nil {
			return client.IgnoreNotFound(err)
		}
		f(&m.Spec)
		return ch.c.Update(ctx, &m)
	})
}

func (ch *churn) power(ctx context.Context, name string, p computev1alpha1.Power) error {
	err := ch.change(ctx, name, func(s *computev1alpha1.MachineSpec) { s.Power = p })
	if err == nil && p == computev1alpha1.PowerOff {
		ch.poweredOff.Add(1)
	} else if err == nil {
		ch.poweredOn.Add(1)
	}
	return err
}

// reimage moves the Machine to the other image.
func (ch *churn) reimage(ctx context.Context, name string) error {
	err := ch.change(ctx, name, func(s *computev1alpha1.MachineSpec) {
		if s.Image == ch.images[0] {
			s.Image = ch.images[1]
		} else {
			s.Image = ch.images[0]
		}
	})
	if err == nil {
		ch.reimaged.Add(1)
	}
	return err
}

func (ch *churn) delete(ctx context.Context, name string) error {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := retryFor(ctx, func() error { return client.IgnoreNotFound(ch.c.Delete(ctx, m)) })
	if err == nil {
		ch.deleted.Add(1)
	}
	return err
}

// fakeMachines runs n Machine lifecycles on the fake pool over d, from workers goroutines,
// each with its own RNG drawn from seed: a create, up to three changes, and (four times
// in five) a delete, each after a random pause.
func (ch *churn) fakeMachines(ctx context.Context, seed int64, n, workers int, d time.Duration) error {
	start := time.Now()
	perWorker := (n + workers - 1) / workers
	slot := d / time.Duration(perWorker)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			for k := 0; k < perWorker; k++ {
				i := w + k*workers
				if i >= n {
					return
				}
				// Lifecycles start spread over the run, so kills land among them.
				if wait := time.Until(start.Add(time.Duration(k)*slot + time.Duration(rng.Int63n(int64(slot))))); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				if err := ch.lifecycle(ctx, rng, fmt.Sprintf("m-%04d", i), slot); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (ch *churn) lifecycle(ctx context.Context, rng *rand.Rand, name string, slot time.Duration) error {
	pause := func() { time.Sleep(time.Duration(rng.Int63n(int64(slot/4) + 1))) }
	if err := ch.create(ctx, name, "fake", ch.images[rng.Intn(2)]); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	off := false
	for ops := rng.Intn(4); ops > 0; ops-- {
		pause()
		var err error
		switch {
		case rng.Intn(3) == 0:
			err = ch.reimage(ctx, name)
		case off:
			err, off = ch.power(ctx, name, computev1alpha1.PowerOn), false
		default:
			err, off = ch.power(ctx, name, computev1alpha1.PowerOff), true
		}
		if err != nil {
			return fmt.Errorf("changing %s: %w", name, err)
		}
	}
	if rng.Intn(5) == 0 {
		return nil // kept to the end, and checked there
	}
	pause()
	if err := ch.delete(ctx, name); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// vms runs n QEMU Machines through power off, on and a reimage at random moments of d,
// kept to the end.
func (ch *churn) vms(ctx context.Context, rng *rand.Rand, n int, d time.Duration) error {
	at := func(lo, hi float64) time.Duration { return spread(rng, d, lo, hi) }
	var steps []step
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("vm-%d", i)
		if err := ch.create(ctx, name, "qemu", ch.images[0]); err != nil {
			return err
		}
		steps = append(steps,
			step{at(0.1, 0.3), func() error { return ch.power(ctx, name, computev1alpha1.PowerOff) }},
			step{at(0.35, 0.5), func() error { return ch.power(ctx, name, computev1alpha1.PowerOn) }},
			step{at(0.55, 0.8), func() error { return ch.reimage(ctx, name) }})
	}
	return runSteps(ctx, steps)
}

// metalMachines claims two fake-hardware Hosts, powers one off and on, and releases one
// for a third Machine to claim, at random moments of d.
func (ch *churn) metalMachines(ctx context.Context, rng *rand.Rand, d time.Duration) error {
	// Fake hardware only: its disk image is not one an emulated server boots.
	fake := func(name string) *computev1alpha1.Machine {
		m := machine(name, "metal", ch.metal)
		m.Spec.HostSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: dev.LabelEmulated, Operator: metav1.LabelSelectorOpDoesNotExist}}}
		return m
	}
	for _, name := range []string{"bm-1", "bm-2"} {
		if err := ch.createMachine(ctx, fake(name)); err != nil {
			return err
		}
	}
	at := func(lo, hi float64) time.Duration { return spread(rng, d, lo, hi) }
	steps := []step{
		{at(0.2, 0.4), func() error { return ch.delete(ctx, "bm-1") }},
		{at(0.3, 0.5), func() error { return ch.power(ctx, "bm-2", computev1alpha1.PowerOff) }},
		{at(0.45, 0.6), func() error { return ch.createMachine(ctx, fake("bm-3")) }},
		{at(0.6, 0.8), func() error { return ch.power(ctx, "bm-2", computev1alpha1.PowerOn) }},
	}
	return runSteps(ctx, steps)
}

// serverMachines gives each emulated server (by architecture) a Machine of the test OS
// that is powered off, on and reimaged, then deleted for a second Machine to claim the
// server and keep it, at random moments of d; and counts the boots each was asked for.
func (ch *churn) serverMachines(ctx context.Context, rng *rand.Rand, d time.Duration, archs []computev1alpha1.Architecture) error {
	at := func(lo, hi float64) time.Duration { return spread(rng, d, lo, hi) }
	onServer := func(name string, arch computev1alpha1.Architecture) func() error {
		return func() error {
			m := machine(name, "metal", ch.images[0])
			m.Spec.Architecture = arch
			m.Spec.HostSelector = &metav1.LabelSelector{MatchLabels: map[string]string{dev.LabelEmulated: "true"}}
			return ch.asked(name, ch.createMachine(ctx, m))
		}
	}
	var steps []step
	for i, arch := range archs {
		first, second := fmt.Sprintf("srv-%d", 2*i+1), fmt.Sprintf("srv-%d", 2*i+2)
		if err := onServer(first, arch)(); err != nil {
			return err
		}
		// Each boot asked 20 s or more before the next change in the short run (a deploy and
		// a TCG boot of the test OS on a loaded machine take about that), so most are seen
		// on the console rather than overtaken.
		steps = append(steps,
			step{at(0.25, 0.3), func() error { return ch.power(ctx, first, computev1alpha1.PowerOff) }},
			step{at(0.3, 0.35), func() error { return ch.asked(first, ch.power(ctx, first, computev1alpha1.PowerOn)) }},
			step{at(0.55, 0.6), func() error { return ch.asked(first, ch.reimage(ctx, first)) }},
			step{at(0.8, 0.85), func() error { return ch.delete(ctx, first) }},
			step{at(0.85, 0.9), func() error {
				// As a user would, once the first is gone: created while its server is still
				// being released, the Machine is refused and its pool left out for minutes.
				ch.awaitGone(ctx, first, 3*time.Minute)
				return onServer(second, arch)()
			}})
	}
	return runSteps(ctx, steps)
}

// awaitGone waits, up to limit, until Machine name no longer exists (across an
// apiserver that is down); past the limit the caller goes on and the audit tells.
func (ch *churn) awaitGone(ctx context.Context, name string, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		err := ch.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &computev1alpha1.Machine{})
		if apierrors.IsNotFound(err) {
			return
		}
	}
}

// asked counts one boot asked of Machine name when err, the answer to the asking, is nil.
func (ch *churn) asked(name string, err error) error {
	if err == nil {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if ch.boots == nil {
			ch.boots = map[string]int{}
		}
		ch.boots[name]++
	}
	return err
}

// askedBoots is a copy of the boots asked so far.
func (ch *churn) askedBoots() map[string]int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	out := make(map[string]int, len(ch.boots))
	for k, v := range ch.boots {
		out[k] = v
	}
	return out
}

// step is something done at an offset from the start of the run.
type step struct {
	at time.Duration
	do func() error
}

// spread draws an offset between the fractions lo and hi of d.
func spread(rng *rand.Rand, d time.Duration, lo, hi float64) time.Duration {
	return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(d))
}

// runSteps carries out steps at their offsets from now, in order of offset.
func runSteps(ctx context.Context, steps []step) error {
	start := time.Now()
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	for _, s := range steps {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(s.at))):
		}
		if err := s.do(); err != nil {
			return err
		}
	}
	return nil
}
