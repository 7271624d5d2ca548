package datatemplate

import (
	"maps"
	"slices"
)

// Allocate gives each of names that has no index the lowest index no machine holds, in
// sorted name order, and returns the allocations (a new map; existing is not changed). A
// machine keeps its index for as long as it is allocated, and its index is given again only
// after Release. It never releases anything: a name missing from names may be a machine the
// caller's cache has not seen yet, whose index must not be handed out twice.
func Allocate(existing map[string]int32, names ...string) map[string]int32 {
	out := maps.Clone(existing)
	if out == nil {
		out = map[string]int32{}
	}
	taken := map[int32]bool{}
	for _, i := range out {
		taken[i] = true
	}
	next := int32(0)
	for _, n := range slices.Sorted(slices.Values(names)) {
		if _, ok := out[n]; ok {
			continue
		}
		for taken[next] {
			next++
		}
		out[n], taken[next] = next, true
	}
	return out
}

// Release frees the indexes of names (machines deleted for good), for Allocate to give
// again; it returns a new map.
func Release(existing map[string]int32, names ...string) map[string]int32 {
	out := maps.Clone(existing)
	for _, n := range names {
		delete(out, n)
	}
	return out
}
