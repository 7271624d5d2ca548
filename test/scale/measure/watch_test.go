package measure

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/anvil-dev/anvil/internal/watchstats"
)

// noWatchList is a fake client saying so: it answers plain lists and watches only.
type noWatchList struct{ client.WithWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// countingWatches is c with its watches counted once open; the first is first when given.
func countingWatches(c client.WithWatch, first watch.Interface, opened *atomic.Int32) client.WithWatch {
	var calls atomic.Int32
	return interceptor.NewClient(c, interceptor.Funcs{Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
		if calls.Add(1) == 1 && first != nil {
			opened.Add(1)
			return first, nil
		}
		w, err := c.Watch(ctx, list, opts...)
		if err == nil {
			opened.Add(1)
		}
		return w, err
	}})
}

// waitOpened waits for n watches to be open: the fake's watches see only later changes.
func waitOpened(t *testing.T, ctx context.Context, opened *atomic.Int32, n int32) {
	t.Helper()
	for opened.Load() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d watches opened", opened.Load(), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func configMap(name, state string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"state": state}}
}

// The failure: the scenario's watch is expired by the apiserver (410, too old
// resource version) while Machines change. The Watch relists, sees the change it missed,
// counts the relist, and still returns when every object is done.
func TestWatchLivesThroughAnExpiredWatch(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	expiring := watch.NewFake()
	var watches atomic.Int32
	c := countingWatches(fake.NewClientBuilder().WithScheme(scheme).WithObjects(configMap("a", "pending"), configMap("b", "pending")).Build(),
		expiring, &watches)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := watchstats.Sum(watchstats.Read(), WatchClient)
	w, err := StartWatch(ctx, noWatchList{c}, "ns", func() client.ObjectList { return &corev1.ConfigMapList{} }, func(o client.Object) bool {
		return o.(*corev1.ConfigMap).Data["state"] == "done"
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// a is done while the only watch open is the one about to expire: only a relist tells.
	if err := c.Update(ctx, configMap("a", "done")); err != nil {
		t.Fatal(err)
	}
	s := apierrors.NewResourceExpired("too old resource version: 1 (80)").Status()
	expiring.Error(&s)
	waitOpened(t, ctx, &watches, 2)
	if err := c.Update(ctx, configMap("b", "done")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Wait(ctx, 2, 30*time.Second); err != nil {
		t.Fatalf("Wait: %v (seen done: %v)", err, w.DoneAt())
	}
	after := watchstats.Sum(watchstats.Read(), WatchClient)
	if after.Relists-before.Relists != 1 || after.Ends["expired"]-before.Ends["expired"] != 1 {
		t.Errorf("counted %+v after %+v; want one relist and one expiry more", after, before)
	}
}

// Objects there before the watch started count only once they change, as with a watch
// opened from the namespace's resource version.
func TestWatchCountsObjectsThereBeforeOnlyWhenTheyChange(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var watches atomic.Int32
	c := countingWatches(fake.NewClientBuilder().WithScheme(scheme).WithObjects(configMap("old", "done")).Build(), nil, &watches)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := StartWatch(ctx, noWatchList{c}, "ns", func() client.ObjectList { return &corev1.ConfigMapList{} }, func(o client.Object) bool {
		return o.(*corev1.ConfigMap).Data["state"] == "done"
	})
	if err != nil {
		t.Fatal(err)
	}
	waitOpened(t, ctx, &watches, 1)
	if err := c.Create(ctx, configMap("new", "done")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Wait(ctx, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := w.DoneAt(); len(got) != 1 || got["new"].IsZero() {
		t.Errorf("seen done: %v; want only new", got)
	}
}
