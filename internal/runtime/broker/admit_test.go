package broker

import (
	"fmt"
	"sync"
	"testing"

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
