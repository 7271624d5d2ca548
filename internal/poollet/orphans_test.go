package poollet

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestOrphanGuard(t *testing.T) {
	g := &orphanGuard{limit: 2}
	if held, _ := g.holds(); !held {
		t.Error("orphans may be deleted before they were ever counted")
	}
	st := &computev1alpha1.MachinePoolStatus{}
	for _, tc := range []struct {
		count    int
		wantHeld bool
	}{
		{0, false}, {2, false}, {3, true}, {1, false},
	} {
		g.set(tc.count)
		held, n := g.holds()
		g.condition(st, 1)
		c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionOrphansHeld)
		if held != tc.wantHeld || n != tc.count || (c != nil) != tc.wantHeld {
			t.Errorf("count %d: held %v (count %d), condition %v; want held %v", tc.count, held, n, c, tc.wantHeld)
		}
		if c != nil && (c.Reason != computev1alpha1.ReasonTooManyOrphans || !strings.Contains(c.Message, "3 runtime machines")) {
			t.Errorf("count %d: condition %+v", tc.count, c)
		}
	}
}
