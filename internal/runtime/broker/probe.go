package broker

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// probe asks the downstream API every ProbeInterval whether it answers. Once it has
// failed for UnreachableAfter, every machine keeps its last status and says the site is
// unreachable (mapping.ConditionSiteReachable); the first answer after clears it. An
// informer cannot tell: it keeps its last objects and retries in silence.
func (r *Runtime) probe(ctx context.Context) {
	var failingSince time.Time
	tick := time.NewTicker(r.opts.ProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, r.opts.ProbeInterval)
		err := r.opts.APIReader.List(pctx, &computev1alpha1.MachineList{}, client.InNamespace(r.opts.Namespace),
			client.MatchingLabels{mapping.LabelPool: r.opts.PoolName}, client.Limit(1))
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			failingSince = time.Time{}
			r.setUnreachable("")
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) >= r.opts.UnreachableAfter:
			r.setUnreachable(err.Error())
		}
	}
}

// setUnreachable records why the site does not answer ("" when it does) and, when that
// changes whether it answers, recomputes every machine.
func (r *Runtime) setUnreachable(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.unreachable == "") == (why == "") {
		r.unreachable = why
		return
	}
	if why == "" {
		r.opts.Logger.Info("the downstream site answers again")
	} else {
		r.opts.Logger.Info("the downstream site does not answer; machines keep their last status", "error", why)
	}
	r.unreachable = why
	for name := range r.objs {
		r.refreshLocked(name)
	}
}
