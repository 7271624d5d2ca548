package measure

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateAll creates the n objects newObj returns, from o.creators goroutines, and reports
// when the first create was sent and when the last returned.
func CreateAll(ctx context.Context, c client.Client, n, creators int, newObj func(i int) client.Object) (first, last time.Time, err error) {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	first = time.Now()
	for w := 0; w < creators; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := c.Create(ctx, newObj(i)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first, time.Now(), firstErr
}

// Watch counts the distinct objects of one namespace that reach a state (bound, Running),
// from a resource version taken before the first create, so no change is missed; a watch
// the apiserver ends is reopened where it stopped.
type Watch struct {
	c         client.WithWatch
	list      func() client.ObjectList
	namespace string
	rv        string
}

// StartWatch takes the namespace's current resource version; call it before creating.
func StartWatch(ctx context.Context, c client.WithWatch, namespace string, list func() client.ObjectList) (*Watch, error) {
	l := list()
	if err := c.List(ctx, l, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return nil, err
	}
	rv := l.(metav1.ListInterface).GetResourceVersion()
	return &Watch{c: c, list: list, namespace: namespace, rv: rv}, nil
}

// Wait returns the time the n-th object was seen with done true.
func (b *Watch) Wait(ctx context.Context, n int, timeout time.Duration, done func(client.Object) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := map[string]struct{}{}
	for {
		w, err := b.c.Watch(ctx, b.list(), client.InNamespace(b.namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: b.rv}})
		if err != nil {
			return time.Time{}, err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return time.Time{}, fmt.Errorf("watch error: %v", ev.Object)
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			b.rv = o.GetResourceVersion()
			if ev.Type != watch.Deleted && done(o) {
				seen[o.GetName()] = struct{}{}
				if len(seen) == n {
					w.Stop()
					return time.Now(), nil
				}
			}
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("%d of %d done before the time limit", len(seen), n)
		}
	}
}

// ForEach runs f for 0..n-1 from workers goroutines and returns the first error.
func ForEach(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Namespace is a Namespace object of that name.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// ReadMetrics reads a server's /metrics (Prometheus text) through rc and calls sample for
// every line of a metric in names, with a reader of its labels and its value.
func ReadMetrics(ctx context.Context, rc rest.Interface, names []string, sample func(name string, label func(string) string, value float64)) error {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return fmt.Errorf("metrics line %q: %w", line, err)
		}
		sample(name, func(l string) string { return metricLabel(line, l) }, v)
	}
	return sc.Err()
}

// metricLabel reads one label's value from a metrics line ("" when it has none).
func metricLabel(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}
