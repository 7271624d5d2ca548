package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// ceilingRound binds Machines with a plain client: an informer hands each new Machine to one
// of 16 workers, which patch machinePoolRef once, at the schedulers' QPS and burst. No
// decision, no scheduling cache, no status: the floor of what binding through the API costs.
func ceilingRound(ctx context.Context, a *anvilSide, round int) (sideResult, error) {
	cfg := rest.CopyConfig(a.env.Config)
	cfg.QPS, cfg.Burst = a.o.qps, a.o.burst
	binder, err := client.NewWithWatch(cfg, client.Options{Scheme: a.env.Scheme})
	if err != nil {
		return sideResult{}, err
	}
	ns := fmt.Sprintf("ceiling-round-%d", round)
	if err := a.c.Create(ctx, measure.Namespace(ns)); err != nil {
		return sideResult{}, err
	}
	bw, err := measure.StartWatch(ctx, a.c, ns, func() client.ObjectList { return &computev1alpha1.MachineList{} }, func(o client.Object) bool {
		return o.(*computev1alpha1.Machine).Spec.MachinePoolRef != nil
	})
	if err != nil {
		return sideResult{}, err
	}
	defer bw.Stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each new Machine once, as a plain client binding what it sees created would.
	todo := make(chan string, a.o.objects)
	queued := map[string]bool{}
	stopped, err := measure.Follow(wctx, binder, ns, func() client.ObjectList { return &computev1alpha1.MachineList{} },
		func(o client.Object, initial bool) {
			if !initial && !queued[o.GetName()] {
				queued[o.GetName()] = true
				todo <- o.GetName()
			}
		})
	if err != nil {
		return sideResult{}, err
	}
	go func() {
		<-stopped
		close(todo)
	}()
	var wg sync.WaitGroup
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"machinePoolRef":{"name":"pool-0000"}}}`))
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range todo {
				m := &computev1alpha1.Machine{}
				m.Namespace, m.Name = ns, name
				_ = binder.Patch(wctx, m, patch)
			}
		}()
	}
	first, lastCreate, err := measure.CreateAll(ctx, a.c, a.o.objects, a.o.creators, func(i int) client.Object { return benchMachine(ns, i) })
	if err != nil {
		return sideResult{}, err
	}
	lastBound, err := bw.Wait(ctx, a.o.objects, a.o.timeout)
	cancel()
	wg.Wait()
	if err != nil {
		return sideResult{}, err
	}
	return result(a.o.objects, first, lastCreate, lastBound), nil
}
