package measure

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/watchstats"
)

// WatchClient is the name a scenario's own informers are counted under (watchstats).
const WatchClient = "scenario"

// Follow runs client-go's informer over the objects of one namespace of list's kind and
// calls f with every object added or changed, from one goroutine, until ctx ends (initial
// says the object was there when it started); it returns once the informer has synced,
// and stopped is closed once it has stopped. A watch the apiserver closes is resumed and
// one it expired is relisted, as in anvil's own processes, counted under WatchClient: an
// object's latest state is never missed, though after a relist it is seen later than it
// happened. A client that says it does not support watch-list (a fake) gets plain lists.
func Follow(ctx context.Context, c client.WithWatch, namespace string, list func() client.ObjectList, f func(o client.Object, initial bool)) (stopped <-chan struct{}, err error) {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l := list()
			// Limit and Continue are set apart: the client takes them from its own options.
			err := c.List(ctx, l, client.InNamespace(namespace), &client.ListOptions{Raw: &opts, Limit: opts.Limit, Continue: opts.Continue})
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, list(), client.InNamespace(namespace), &client.ListOptions{Raw: &opts})
		},
	}
	example := itemOf(list())
	kind := watchstats.KindOf(example)
	inf := toolscache.NewSharedIndexInformer(watchstats.Counted(toolscache.ToListWatcherWithWatchListSemantics(lw, c), WatchClient, kind),
		example, 0, toolscache.Indexers{})
	call := func(obj any, initial bool) {
		if o, ok := obj.(client.Object); ok {
			f(o, initial)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: call, UpdateFunc: func(_, obj any) { call(obj, false) },
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced, reg.HasSynced) {
		<-done
		return nil, fmt.Errorf("following %s in %s: %w", kind, namespace, ctx.Err())
	}
	return done, nil
}

// itemOf is an empty item of a typed list (its Items' element), for the informer to check
// what it decodes against; nil when the list has no typed Items.
func itemOf(l client.ObjectList) runtime.Object {
	items, ok := reflect.TypeOf(l).Elem().FieldByName("Items")
	if !ok || items.Type.Kind() != reflect.Slice {
		return nil
	}
	o, _ := reflect.New(items.Type.Elem()).Interface().(runtime.Object)
	return o
}

// Watch notes, per object of one namespace, when it was first seen in a state (bound,
// Running), through an informer started before the first create.
type Watch struct {
	stop    context.CancelFunc
	stopped <-chan struct{}
	done    func(client.Object) bool

	mu      sync.Mutex
	at      map[string]time.Time
	order   []time.Time   // the times in at, as they were noted
	changed chan struct{} // a token whenever at grows
}

// StartWatch follows the namespace's objects from now on, noting each the first time done
// says it is; call it before creating. Objects already there count only once they change.
// done is called from the watch's goroutine.
func StartWatch(ctx context.Context, c client.WithWatch, namespace string, list func() client.ObjectList, done func(client.Object) bool) (*Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watch{stop: cancel, done: done, at: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	stopped, err := Follow(ctx, c, namespace, list, w.note)
	if err != nil {
		cancel()
		return nil, err
	}
	w.stopped = stopped
	return w, nil
}

func (w *Watch) note(o client.Object, initial bool) {
	if initial || !w.done(o) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.at[o.GetName()]; seen {
		return
	}
	now := time.Now()
	w.at[o.GetName()] = now
	w.order = append(w.order, now)
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Wait returns the time the n-th object was seen done, and stops the watch (done is not
// called after it returns).
func (w *Watch) Wait(ctx context.Context, n int, timeout time.Duration) (time.Time, error) {
	defer w.Stop()
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	for {
		w.mu.Lock()
		count := len(w.order)
		var nth time.Time
		if count >= n && n > 0 {
			nth = w.order[n-1]
		}
		w.mu.Unlock()
		if count >= n {
			return nth, nil
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-limit.C:
			return time.Time{}, fmt.Errorf("%d of %d done before the time limit", count, n)
		}
	}
}

// Stop ends the watch and waits for its goroutine.
func (w *Watch) Stop() {
	w.stop()
	<-w.stopped
}

// DoneAt is when each object was first seen done, by name.
func (w *Watch) DoneAt() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.at))
	for k, v := range w.at {
		out[k] = v
	}
	return out
}
