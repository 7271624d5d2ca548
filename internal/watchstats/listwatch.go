package watchstats

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// NewInformer is controller-runtime's cache.Options.NewInformer for a process whose
// informers are counted under client: client-go's shared informer over a counted
// ListerWatcher.
func NewInformer(client string) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(Counted(lw, client, KindOf(obj)), obj, resync, indexers)
	}
}

// KindOf names an informer's example object: its kind when set, else its Go type's name.
func KindOf(obj runtime.Object) string {
	if obj == nil {
		return "unknown"
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// Counted is lw with its lists and the ends of its watches counted under client and kind.
// One reflector drives it: its first list is the initial one, every later one a relist.
func Counted(lw toolscache.ListerWatcher, client, kind string) toolscache.ListerWatcher {
	return &countedListWatch{parent: lw, lw: toolscache.ToListerWatcherWithContext(lw), counts: countsOf(Key{client, kind})}
}

type countedListWatch struct {
	parent toolscache.ListerWatcher
	lw     toolscache.ListerWatcherWithContext
	counts *counts
	listed atomic.Bool
}

// IsWatchListSemanticsUnSupported passes the wrapped client's answer on to the reflector,
// which otherwise takes a wrapper for a client that supports watch-list.
func (l *countedListWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.parent)
}

func (l *countedListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *countedListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *countedListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	list, err := l.lw.ListWithContext(ctx, opts)
	if err == nil {
		l.noteList(false, opts)
	}
	return list, err
}

func (l *countedListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	// Timed from before the request, as client-go times a watch it may call short: on a
	// busy apiserver the open alone takes a good part of a second.
	started := time.Now()
	w, err := l.lw.WatchWithContext(ctx, opts)
	if err != nil {
		if ctx.Err() == nil {
			l.counts.ends[errorEnd(err)].Add(1)
		}
		return nil, err
	}
	l.noteList(true, opts)
	cw := &countedWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go cw.run(ctx, l.counts, started, opts.TimeoutSeconds)
	return cw, nil
}

// noteList counts a list that was answered: a watch-list the apiserver refuses, which the
// reflector follows with a plain list, is not a relist.
func (l *countedListWatch) noteList(watch bool, opts metav1.ListOptions) {
	if IsList(watch, opts) && l.listed.Swap(true) {
		l.counts.relists.Add(1)
	}
}

// countedWatch passes in's events on unchanged and counts how in ended.
type countedWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *countedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *countedWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

func (w *countedWatch) run(ctx context.Context, c *counts, started time.Time, asked *int64) {
	defer close(w.out)
	var errObj runtime.Object
	stopped, events := false, 0
	defer func() {
		if ctx.Err() != nil {
			// The informer is shutting down: its stream ends, maybe with an error the
			// cancellation caused. A stop, not an end to count.
			errObj, stopped = nil, true
		}
		c.ends[Classify(errObj, stopped, events, time.Since(started), asked)].Add(1)
	}()
	for {
		select {
		case <-w.stop:
			stopped = true
			return
		case ev, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if ev.Type == watch.Error && errObj == nil {
				errObj = ev.Object
			}
			events++
			select {
			case w.out <- ev:
			case <-w.stop:
				stopped = true
				return
			}
		}
	}
}
