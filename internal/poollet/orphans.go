package poollet

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// orphanGuard holds back the deletion of orphans — runtime machines with no Machine of
// this pool — when there are more of them than limit. One orphan is the normal trace of
// a Machine deleted while the poollet was away; many at once mean something is wrong
// (a Machine list that lags or comes from the wrong place, a runtime that is not the one
// it should be), and deleting them would destroy running machines. The pool reconciler
// counts them every interval; until its first count nothing is deleted.
type orphanGuard struct {
	limit int

	mu      sync.Mutex
	counted bool
	count   int
}

// set records a count of orphans.
func (g *orphanGuard) set(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counted, g.count = true, n
}

// holds reports whether orphans must be kept for now, and the last count.
func (g *orphanGuard) holds() (bool, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.counted || g.count > g.limit, g.count
}

// countOrphans lists the runtime's machines and counts those whose Machine is not one of
// the pool's Machines in the cache (deleted machines, on their way out, are not counted).
func countOrphans(ctx context.Context, c client.Client, rt mriv1alpha1.MachineRuntimeClient) (int, error) {
	list, err := rt.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{})
	if err != nil {
		return 0, err
	}
	machines := &computev1alpha1.MachineList{}
	if err := c.List(ctx, machines); err != nil {
		return 0, err
	}
	known := make(map[types.UID]bool, len(machines.Items))
	for i := range machines.Items {
		known[machines.Items[i].UID] = true
	}
	n := 0
	for _, m := range list.GetMachines() {
		if m.GetMetadata().GetDeletedAtUnixNano() == 0 && !known[types.UID(m.GetMetadata().GetLabels()[mri.LabelMachineUID])] {
			n++
		}
	}
	return n, nil
}

// orphanCondition sets or clears OrphansHeld on a pool status from the guard.
func (g *orphanGuard) condition(st *computev1alpha1.MachinePoolStatus, generation int64) {
	held, n := g.holds()
	if !held || n == 0 {
		meta.RemoveStatusCondition(&st.Conditions, computev1alpha1.ConditionOrphansHeld)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: computev1alpha1.ConditionOrphansHeld,
		Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonTooManyOrphans, ObservedGeneration: generation,
		Message: fmt.Sprintf("%d runtime machines have no Machine of this pool, more than the %d the poollet deletes on its own "+
			"(--max-orphans): check the poollet's --pool and --runtime and where the Machines went; delete the runtime's "+
			"machines by hand, or raise the limit, to go on", n, g.limit)})
}
