package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// TestConcurrentCreatesNeverOvercommit (E5): creates of a large class sent all at once
// are admitted exactly as far as the broker's allocatable goes, the rest NO_CAPACITY,
// though each holds no lock while it writes.
func TestConcurrentCreatesNeverOvercommit(t *testing.T) {
	big := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Capabilities: corev1.ResourceList{"cpu": resource.MustParse("20"), "memory": resource.MustParse("1Gi")}}
	if err := env.Client.Create(bg(t), big); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s := newSite(t, "concurrent")
	r := s.mustStart(t)
	var fit int64
	eventually(t, "saw the class and the pool", func() bool {
		st, err := r.Status(bg(t), &mriv1alpha1.StatusRequest{})
		fit = st.GetAllocatable().GetMilliCpu() / 20000
		return err == nil && fit > 0 && r.opts.Cache.Get(bg(t), client.ObjectKey{Name: "big"}, &computev1alpha1.MachineClass{}) == nil
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for i := range fit + 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := upstream(fmt.Sprintf("8f4a3d0e-0000-4000-8000-2000000000%02d", i))
			m.Spec.Class, m.Spec.Resources.MilliCpu = "big", 20000
			_, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case status.Code(err) == codes.ResourceExhausted && mri.ReasonOf(err) == mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY:
				refused++
			default:
				t.Errorf("create %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if int64(admitted) != fit || refused != 3 {
		t.Fatalf("%d admitted and %d refused; want %d and 3", admitted, refused, fit)
	}
}

// blockingReader holds its Gets of one Machine name until release is closed, and says
// on entered when the first began: a downstream API slow to answer one create's read.
type blockingReader struct {
	client.Reader
	name    string
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func (b *blockingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*computev1alpha1.Machine); ok && key.Name == b.name {
		b.once.Do(func() { close(b.entered) })
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Reader.Get(ctx, key, obj, opts...)
}

// TestCreateWaitingOnTheAPIHoldsNoOtherBack: a create whose read of the downstream API
// hangs does not hold the others back. Admission is one at a time, but the read for an
// earlier create's Machine is outside it: under it, a poollet's concurrent creates went
// through one API round trip at a time (test/scale/broker).
func TestCreateWaitingOnTheAPIHoldsNoOtherBack(t *testing.T) {
	s := newSite(t, "parallel")
	slow, fast := upstream("8f4a3d0e-0000-4000-8000-300000000001"), upstream("8f4a3d0e-0000-4000-8000-300000000002")
	d, err := mapping.NewDownstream(mapping.Target{Namespace: s.ns, Pool: s.pool}, slow)
	if err != nil {
		t.Fatal(err)
	}
	reader := &blockingReader{Reader: env.Client, name: d.Machine.Name, entered: make(chan struct{}), release: make(chan struct{})}
	r, err := s.startWith(env.Config, env.Client, func(o *Options) { o.APIReader = reader })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	slowDone := make(chan error, 1)
	go func() {
		_, err := r.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: slow})
		slowDone <- err
	}()
	<-reader.entered
	fastDone := make(chan error, 1)
	go func() {
		_, err := r.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: fast})
		fastDone <- err
	}()
	ended := false
	var fastErr error
	select {
	case fastErr = <-fastDone:
		ended = true
	case <-time.After(time.Minute):
	}
	close(reader.release)
	if err := <-slowDone; err != nil {
		t.Errorf("the create that waited: %v", err)
	}
	if !ended {
		fastErr = <-fastDone
		t.Error("the other create ended only once the first's read was answered")
	}
	if fastErr != nil {
		t.Errorf("the other create: %v", fastErr)
	}
	// The downstream pool is the package's: give its room back to the tests after this one.
	if err := env.Client.DeleteAllOf(bg(t), &computev1alpha1.Machine{}, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gave the room back", func() bool {
		list := &computev1alpha1.MachineList{}
		return env.Client.List(bg(t), list, client.InNamespace(s.ns)) == nil && len(list.Items) == 0
	})
}
