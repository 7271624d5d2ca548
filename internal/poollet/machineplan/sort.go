package machineplan

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Sorted is what a runtime holds under one Machine's name.
type Sorted struct {
	// Mine is the Machine's one runtime machine, nil when it has none.
	Mine *mriv1alpha1.Machine
	// Delete are the ids to delete: machines of an earlier Machine of the name (or, with
	// no uid, of a Machine that is gone), and duplicates of Mine. Machines the runtime is
	// deleting already are not asked again.
	Delete []string
	// Duplicates is how many of Delete are copies of Mine.
	Duplicates int
	// Kept are the ids of machines without a Machine that orphansHeld keeps.
	Kept []string
}

// Sort splits the runtime machines listed under a Machine's name: those carrying the
// Machine's uid are its own, and of several the oldest is kept, since it is the one a user
// may already be using; the others are garbage, unless orphansHeld (too many runtime
// machines lack a Machine for the poollet to delete them on its own).
func Sort(list []*mriv1alpha1.Machine, uid types.UID, orphansHeld bool) Sorted {
	var mine, garbage []*mriv1alpha1.Machine
	var s Sorted
	for _, rm := range list {
		switch {
		case uid != "" && rm.GetMetadata().GetLabels()[mri.LabelMachineUID] == string(uid):
			mine = append(mine, rm)
		case orphansHeld:
			s.Kept = append(s.Kept, rm.GetMetadata().GetId())
		default:
			garbage = append(garbage, rm)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		a, b := mine[i].GetMetadata(), mine[j].GetMetadata()
		if a.GetCreatedAtUnixNano() != b.GetCreatedAtUnixNano() {
			return a.GetCreatedAtUnixNano() < b.GetCreatedAtUnixNano()
		}
		return a.GetId() < b.GetId()
	})
	if len(mine) > 0 {
		s.Mine = mine[0]
		s.Duplicates = len(mine) - 1
		garbage = append(garbage, mine[1:]...)
	}
	for _, g := range garbage {
		if g.GetMetadata().GetDeletedAtUnixNano() == 0 {
			s.Delete = append(s.Delete, g.GetMetadata().GetId())
		}
	}
	return s
}
