package claim

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Claimant is a Machine that references the object.
type Claimant struct {
	Name    string
	UID     types.UID
	Created time.Time
	// Deleting Machines keep a claim they hold (their runtime may still have the device
	// attached) but are not given a new one.
	Deleting bool
}

// Holder returns who should hold the object: the current holder while it still
// references it, else the oldest claimant not being deleted (by creation time, then
// name), else nobody.
func Holder(current *computev1alpha1.ClaimReference, claimants []Claimant) *computev1alpha1.ClaimReference {
	if current != nil {
		for _, c := range claimants {
			if string(c.UID) == current.UID {
				return current
			}
		}
	}
	var eligible []Claimant
	for _, c := range claimants {
		if !c.Deleting {
			eligible = append(eligible, c)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	sort.Slice(eligible, func(i, j int) bool {
		if !eligible[i].Created.Equal(eligible[j].Created) {
			return eligible[i].Created.Before(eligible[j].Created)
		}
		return eligible[i].Name < eligible[j].Name
	})
	return &computev1alpha1.ClaimReference{Name: eligible[0].Name, UID: string(eligible[0].UID)}
}

// Same reports whether a and b name the same holder (or both nobody).
func Same(a, b *computev1alpha1.ClaimReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.Name == b.Name
}
