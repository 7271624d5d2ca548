package poollet

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/poollet/machineplan"
)

// A runtime change seen on a cached Machine older than the poollet's own last status write
// must be retried, not dropped: the informer catching up with that write wakes no
// reconcile, since the Machine watch ignores status-only changes. (A builder whose guest
// powered off right after its start was reported stayed Running this way.)
func TestWriteStatusOnAStaleCopyIsRetriedNotDropped(t *testing.T) {
	r := &MachineReconciler{}
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "99"}}
	m.Status.State = computev1alpha1.MachineStateRunning
	r.written.Store(m.UID, uint64(100))
	st := *m.Status.DeepCopy()
	st.State = computev1alpha1.MachineStateShutdown
	if err := r.writeStatus(context.Background(), m, st); !errors.Is(err, errRetry) {
		t.Fatalf("writeStatus on a copy older than our own write = %v, want errRetry", err)
	}
	p := &machineplan.Pass{Machine: m}
	if res, err := r.execute(context.Background(), p, machineplan.Action{Kind: machineplan.WriteStatus, Status: &st}); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("the reconcile ends with %+v, %v; want a requeue", res, err)
	}
}
