package kit

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watched is one kind a runtime's Run reads: its objects go to Handler as they change
// (nil: the runtime only reads them from the cache).
type Watched struct {
	Object  client.Object
	Handler toolscache.ResourceEventHandler
}

// Watch registers each handler with its informer, removes them when ctx ends, and waits
// until every informer has synced and every handler has been given what was there: the
// one way the runtimes built on the kit start watching (it is what a controller-runtime
// controller does, without a work queue of its own, since each runtime keys its work
// differently).
func (l *Lifecycle) Watch(ctx context.Context, c cache.Informers, watched ...Watched) error {
	var synced []toolscache.InformerSynced
	for _, w := range watched {
		inf, err := c.GetInformer(ctx, w.Object)
		if err != nil {
			return fmt.Errorf("%s: watching %T: %w", l.name, w.Object, err)
		}
		synced = append(synced, inf.HasSynced)
		if w.Handler == nil {
			continue
		}
		reg, err := inf.AddEventHandler(w.Handler)
		if err != nil {
			return fmt.Errorf("%s: watching %T: %w", l.name, w.Object, err)
		}
		synced = append(synced, reg.HasSynced)
		context.AfterFunc(ctx, func() { _ = inf.RemoveEventHandler(reg) })
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s: caches never synced: %w", l.name, ctx.Err())
	}
	return nil
}
