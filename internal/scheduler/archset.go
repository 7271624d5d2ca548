package scheduler

import (
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// ArchSet is a set of architectures as a bit mask, so an architecture filter is one AND.
// The zero value is the empty set.
type ArchSet uint8

// AnyArch is every architecture anvil knows.
var AnyArch = ArchSetOf(computev1alpha1.KnownArchitectures...)

// ArchSetOf returns the set of the known architectures among archs; unknown names are
// ignored, since they can match nothing.
func ArchSetOf(archs ...computev1alpha1.Architecture) ArchSet {
	var s ArchSet
	for _, a := range archs {
		for i, k := range computev1alpha1.KnownArchitectures {
			if a == k {
				s |= 1 << i
			}
		}
	}
	return s
}

// Has reports whether a is in s.
func (s ArchSet) Has(a computev1alpha1.Architecture) bool { return s&ArchSetOf(a) != 0 }

// List returns the members of s in the order of KnownArchitectures.
func (s ArchSet) List() []computev1alpha1.Architecture {
	var out []computev1alpha1.Architecture
	for i, k := range computev1alpha1.KnownArchitectures {
		if s&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	return out
}
