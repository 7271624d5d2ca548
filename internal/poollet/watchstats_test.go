package poollet_test

import (
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// The poollet's and the manager's informers are client-go's, over watchstats: their watches
// are resumed or relisted by client-go and counted under the process's name, so a scale
// run can say how often they were cut.
func TestInformersAreCounted(t *testing.T) {
	startControllers(t)
	newPool(t, "counted", nil)
	m := newMachine(t, "counted", "vm", nil)
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	counts := watchstats.Read()
	for _, k := range []watchstats.Key{
		{Client: "poollet", Kind: "Machine"}, {Client: "poollet", Kind: "MachinePool"},
		{Client: "anvil-controller-manager", Kind: "Machine"}, {Client: "anvil-controller-manager", Kind: "MachinePool"},
	} {
		if _, ok := counts[k]; !ok {
			t.Errorf("no informer counted as %+v; counted: %v", k, counts)
		}
	}
}
