package kit

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
)

// Work runs workers that take keys from q and hand each to fn, until q shuts down; it
// returns once they all have. A key whose fn fails is tried again with q's backoff (a
// conflict quietly: someone else wrote meanwhile, which is no failure), one whose fn asks
// to be looked at again after a while is, and the others are done. What keys stand for is
// the runtime's own (Host names, Secret names): the one way the runtimes built on the kit
// work through what their watches queue.
func Work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], workers int, log logr.Logger,
	fn func(ctx context.Context, key string) (after time.Duration, err error)) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for workOne(ctx, q, log, fn) {
			}
		}()
	}
	wg.Wait()
}

// workOne handles one key; false once q is shut down.
func workOne(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], log logr.Logger,
	fn func(ctx context.Context, key string) (time.Duration, error)) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	after, err := fn(ctx, key)
	switch {
	case apierrors.IsConflict(err):
		q.AddRateLimited(key)
	case err != nil && ctx.Err() == nil:
		log.Error(err, "retrying", "key", key)
		q.AddRateLimited(key)
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
	return true
}
