package kit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
)

// A failing key is tried again, a conflict too, a key that asks to be looked at again is,
// and a key that succeeds is done; Work returns once the queue shuts down.
func TestWork(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	fn := func(_ context.Context, key string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		n := calls[key]
		switch {
		case key == "fails" && n == 1:
			return 0, errors.New("once")
		case key == "conflicts" && n == 1:
			return 0, apierrors.NewConflict(schema.GroupResource{Resource: "hosts"}, key, errors.New("written meanwhile"))
		case key == "later" && n == 1:
			return 20 * time.Millisecond, nil
		}
		return 0, nil
	}
	done := make(chan struct{})
	go func() {
		Work(context.Background(), q, 2, logr.Discard(), fn)
		close(done)
	}()
	for _, k := range []string{"fails", "conflicts", "later", "once"} {
		q.Add(k)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := calls["fails"] == 2 && calls["conflicts"] == 2 && calls["later"] == 2 && calls["once"] == 1
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("calls %v", calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // nothing more comes
	mu.Lock()
	if calls["fails"] != 2 || calls["conflicts"] != 2 || calls["later"] != 2 || calls["once"] != 1 {
		t.Errorf("calls %v, want each retried once and once done", calls)
	}
	mu.Unlock()
	q.ShutDown()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Work did not return after the queue shut down")
	}
}
