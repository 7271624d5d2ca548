package poollet_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// A pool's status.allocated is what its Machines hold by the scheduler's accounting, in
// every namespace: it rises as Machines are bound and falls as one goes Terminated or is
// deleted; other pools' Machines are not counted. The poollet runs as its own narrow
// identity and reads the runtime only once an hour here: only its watch of the pool's
// Machines can move the figure in time. A status that says the same is not written again.
func TestPoolStatusAllocatedFollowsItsMachines(t *testing.T) {
	startControllers(t)
	ctx := context.Background()
	pool := "alloc"
	startPool(t, &testPool{t: t, name: pool, restConfig: poolletIdentity(t, pool), interval: time.Hour}, nil)
	writes := &statusWrites{path: "/machinepools/alloc-other/status"}
	startPool(t, &testPool{t: t, name: "alloc-other", restConfig: writes.config()}, nil)
	waitAllocated(t, pool, "0", "0")

	small := newMachine(t, pool, "small", nil)
	huge := newMachine(t, pool, "huge", func(m *computev1alpha1.Machine) {
		m.Namespace, m.Spec.MachineClassRef.Name = "ns-alloc-second", "huge" // another tenant's namespace
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.Namespace}}); err != nil {
			t.Fatal(err)
		}
	})
	other := newMachine(t, "alloc-other", "elsewhere", nil)
	waitAllocated(t, pool, "13", "5Gi")
	waitAllocated(t, "alloc-other", "1", "1Gi")

	// A Terminated Machine holds nothing, though it stays bound until it is deleted. The
	// runtime reports Terminated when a machine cannot run; the fake never does, so the
	// test writes what a poollet would.
	small = waitFor(t, small, "ran", inState(computev1alpha1.MachineStateRunning))
	small.Status.State = computev1alpha1.MachineStateTerminated
	if err := env.Client.Status().Update(ctx, small); err != nil {
		t.Fatal(err)
	}
	waitAllocated(t, pool, "12", "4Gi")

	// Nothing changes: the other pool's poollet (reading its runtime every half second)
	// sends no status write at all, its figure included, once its Machine has settled.
	waitFor(t, other, "ran", inState(computev1alpha1.MachineStateRunning))
	time.Sleep(time.Second) // the last write of the pool's settling, if any, is done
	before := writes.count.Load()
	time.Sleep(2 * time.Second)
	if n := writes.count.Load() - before; n != 0 {
		t.Errorf("the poollet wrote MachinePool alloc-other's status %d times in 2s with nothing changed", n)
	}

	for _, m := range []*computev1alpha1.Machine{huge, small} {
		if err := env.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		waitFor(t, m, "went away", isGone)
	}
	waitAllocated(t, pool, "0", "0")
	waitAllocated(t, "alloc-other", "1", "1Gi")
}

// statusWrites counts the writes (not reads) a client sends to one path.
type statusWrites struct {
	path  string
	count atomic.Int64
}

// config is the test's admin identity, counting.
func (w *statusWrites) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.HasSuffix(req.URL.Path, w.path) {
				w.count.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// waitAllocated waits until the pool's status.allocated is exactly cpu and memory.
func waitAllocated(t *testing.T, pool, cpu, memory string) {
	t.Helper()
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	var got corev1.ResourceList
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		mp := &computev1alpha1.MachinePool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: pool}, mp); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		got = mp.Status.Allocated
		return equality.Semantic.DeepEqual(got, want), nil
	})
	if err != nil {
		t.Fatalf("MachinePool %s status.allocated = %s, never %s", pool, text(got), text(want))
	}
}

func text(l corev1.ResourceList) string {
	out := "{"
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[name]; ok {
			out += fmt.Sprintf(" %s:%s", name, q.String())
		}
	}
	return out + fmt.Sprintf(" (%d entries) }", len(l))
}

// Machines bound in a stream cost the pool a status write per batch (a second), not one
// each: the pool's status is not rewritten at the pace Machines arrive, and a write of its
// own does not start the next batch early.
func TestPoolStatusAllocatedBatchesABurst(t *testing.T) {
	startControllers(t)
	pool, n := "alloc-burst", 250 // bound over more than a second: several batches
	writes := &statusWrites{path: "/machinepools/" + pool + "/status"}
	startPool(t, &testPool{t: t, name: pool, restConfig: writes.config(), interval: time.Hour}, func(c *fake.Config) {
		c.Allocatable = &mriv1alpha1.Resources{MilliCpu: int64(n) * 1000, MemoryBytes: int64(n) << 30}
	})
	waitAllocated(t, pool, "0", "0")
	start, before := time.Now(), writes.count.Load()
	for i := range n {
		newMachine(t, pool, fmt.Sprintf("m%d", i), nil)
	}
	waitAllocated(t, pool, fmt.Sprint(n), fmt.Sprintf("%dGi", n))
	elapsed, got := time.Since(start), writes.count.Load()-before
	// One a second, and one for a batch cut short at either end.
	if limit := int64(elapsed/time.Second) + 2; got > limit {
		t.Errorf("%d Machines bound in %s cost %d pool status writes, more than %d", n, elapsed.Round(time.Millisecond), got, limit)
	}
	t.Logf("%d Machines bound in %s: %d pool status writes", n, elapsed.Round(time.Millisecond), got)
}
