package imagebuild

import (
	"sort"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// TargetArchitectures is the set an OSImage builds for, sorted: the spec's when it names
// any; otherwise every architecture the fleet's Ready pools run together with those built
// before (the set only grows, so a pool going away removes nothing).
func TargetArchitectures(spec, fleet, previous []computev1alpha1.Architecture) []computev1alpha1.Architecture {
	set := map[computev1alpha1.Architecture]bool{}
	if len(spec) > 0 {
		for _, a := range spec {
			set[a] = true
		}
	} else {
		for _, a := range fleet {
			set[a] = true
		}
		for _, a := range previous {
			set[a] = true
		}
	}
	out := make([]computev1alpha1.Architecture, 0, len(set))
	for a := range set {
		if a.IsKnown() {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
