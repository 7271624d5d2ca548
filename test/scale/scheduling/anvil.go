package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

const numClasses = 20

// classSize is the cpu and memory (GiB) of class i; Pods of the kube side request the same.
func classSize(i int) (cpu, memGi int) { return 1 + i%4, 2 * (1 + i%4) }

type anvilSide struct {
	o   options
	env *harness.Env
	c   client.WithWatch
}

func newAnvilSide(ctx context.Context, env *harness.Env, o options) (*anvilSide, error) {
	c, err := fastClient(env)
	if err != nil {
		return nil, err
	}
	s := &anvilSide{o: o, env: env, c: c}
	return s, s.createFleet(ctx)
}

// startManager runs anvil's controller manager, with its caches warmed by one Machine
// bound before it returns. The returned func stops it.
func (s *anvilSide) startManager(ctx context.Context, round int) (func(), error) {
	opts := manager.DefaultOptions()
	opts.QPS, opts.Burst, opts.Concurrency = s.o.qps, s.o.burst, 16
	opts.MetricsAddr, opts.HealthAddr = "0", "0"
	opts.SkipControllerNameValidation = true                // one manager per round
	opts.ImageArchitectures = manager.ImageArchitecturesAny // placement is measured, not registry lookups
	mgr, err := manager.New(s.env.Config, opts)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stop := func() { cancel(); <-done }
	if _, err := s.bindBatch(ctx, fmt.Sprintf("anvil-warmup-%d", round), 1); err != nil {
		stop()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	// A fresh manager reconciles every existing object once; the clock starts after that.
	if err := waitIdle(ctx, 5*time.Minute); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func (s *anvilSide) createFleet(ctx context.Context) error {
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}}); err != nil {
		return err
	}
	var classes []string
	for i := 0; i < numClasses; i++ {
		cpu, mem := classSize(i)
		name := fmt.Sprintf("class-%02d", i)
		classes = append(classes, name)
		if err := s.c.Create(ctx, &computev1alpha1.MachineClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Capabilities: corev1.ResourceList{
				"cpu": *resource.NewQuantity(int64(cpu), resource.DecimalSI), "memory": resource.MustParse(fmt.Sprintf("%dGi", mem))},
		}); err != nil {
			return err
		}
	}
	_, _, err := measure.CreateAll(ctx, s.c, s.o.targets, s.o.creators, func(i int) client.Object {
		return &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%04d", i)}}
	})
	if err != nil {
		return err
	}
	_, _, err = measure.CreateAll(ctx, s.c, s.o.targets, s.o.creators, func(i int) client.Object {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%04d", i), Namespace: computev1alpha1.PoolLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](3600),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
	})
	if err != nil {
		return err
	}
	return measure.ForEach(s.o.targets, s.o.creators, func(i int) error {
		mp := &computev1alpha1.MachinePool{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: fmt.Sprintf("pool-%04d", i)}, mp); err != nil {
			return err
		}
		mp.Status = computev1alpha1.MachinePoolStatus{
			Architectures:    []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64},
			Capacity:         bigTarget(),
			Allocatable:      bigTarget(),
			SupportedClasses: classes,
			Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: "Benchmark", LastTransitionTime: metav1.Now()}},
		}
		return s.c.Status().Update(ctx, mp)
	})
}

// bigTarget is the allocatable of every pool and node: room for several rounds.
func bigTarget() corev1.ResourceList {
	return corev1.ResourceList{"cpu": resource.MustParse("512"), "memory": resource.MustParse("2Ti"), "pods": resource.MustParse("1000")}
}

// round measures anvil's scheduler; its manager runs only during its own rounds, so it
// never competes with the other sides for the apiserver.
func (s *anvilSide) round(ctx context.Context, round int) (sideResult, error) {
	stop, err := s.startManager(ctx, round)
	if err != nil {
		return sideResult{}, err
	}
	defer stop()
	return s.bindBatch(ctx, fmt.Sprintf("anvil-round-%d", round), s.o.objects)
}

func (s *anvilSide) bindBatch(ctx context.Context, ns string, n int) (sideResult, error) {
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		return sideResult{}, err
	}
	bw, err := measure.StartWatch(ctx, s.c, ns, func() client.ObjectList { return &computev1alpha1.MachineList{} }, func(o client.Object) bool {
		return o.(*computev1alpha1.Machine).Spec.MachinePoolRef != nil
	})
	if err != nil {
		return sideResult{}, err
	}
	defer bw.Stop()
	first, lastCreate, err := measure.CreateAll(ctx, s.c, n, s.o.creators, func(i int) client.Object { return benchMachine(ns, i) })
	if err != nil {
		return sideResult{}, err
	}
	lastBound, err := bw.Wait(ctx, n, s.o.timeout)
	if err != nil {
		return sideResult{}, err
	}
	return result(n, first, lastCreate, lastBound), nil
}

// fastClient is the creator's and watcher's client: rate limits high enough never to be
// what is measured.
func fastClient(env *harness.Env) (client.WithWatch, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	return client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
}

func benchMachine(ns string, i int) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%05d", i)},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: fmt.Sprintf("class-%02d", i%numClasses)},
			Image:           "registry.example/os:1",
		},
	}
}

// waitIdle waits until every controller's work queue in this process is empty, read from
// controller-runtime's metrics registry.
func waitIdle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for quiet := 0; quiet < 3; {
		families, err := metrics.Registry.Gather()
		if err != nil {
			return err
		}
		busy := false
		for _, f := range families {
			if f.GetName() != "workqueue_depth" {
				continue
			}
			for _, m := range f.GetMetric() {
				busy = busy || m.GetGauge().GetValue() > 0
			}
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controllers still busy after %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
