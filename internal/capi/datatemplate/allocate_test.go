package datatemplate

import (
	"fmt"
	"maps"
	"testing"

	"pgregory.net/rapid"
)

func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing map[string]int32
		names    []string
		want     map[string]int32
	}{
		{"first machines in name order", nil, []string{"b", "a", "c"}, map[string]int32{"a": 0, "b": 1, "c": 2}},
		{"kept indexes stay", map[string]int32{"a": 0, "b": 1}, []string{"b", "a"}, map[string]int32{"a": 0, "b": 1}},
		{"lowest free index reused", map[string]int32{"a": 0, "c": 2}, []string{"d"}, map[string]int32{"a": 0, "c": 2, "d": 1}},
		{"gaps filled first, then past the end", map[string]int32{"x": 1, "y": 3}, []string{"p", "q", "r"},
			map[string]int32{"x": 1, "y": 3, "p": 0, "q": 2, "r": 4}},
		{"a name twice gets one index", nil, []string{"a", "a"}, map[string]int32{"a": 0}},
		{"names missing from the list are not released", map[string]int32{"gone-from-cache": 0}, []string{"new"},
			map[string]int32{"gone-from-cache": 0, "new": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.existing)
			if got := Allocate(tc.existing, tc.names...); !maps.Equal(got, tc.want) {
				t.Fatalf("Allocate = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.existing, before) {
				t.Fatalf("Allocate changed its input to %v", tc.existing)
			}
		})
	}
	if got := Release(map[string]int32{"a": 0, "b": 1}, "a", "unknown"); !maps.Equal(got, map[string]int32{"b": 1}) {
		t.Fatalf("Release = %v, want b only", got)
	}
}

// Through any sequence of allocations and releases: indexes are unique (safety), a machine
// keeps its index until released (stability), and a new machine gets the lowest index no
// machine holds (reuse), so indexes stay packed.
func TestAllocateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		state := map[string]int32{}
		pool := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z]{1,3}`), 1, 20, rapid.ID[string]).Draw(t, "names")
		for step := range rapid.IntRange(1, 30).Draw(t, "steps") {
			names := rapid.SliceOfN(rapid.SampledFrom(pool), 0, 5).Draw(t, fmt.Sprint("names ", step))
			if rapid.Bool().Draw(t, fmt.Sprint("release ", step)) {
				state = Release(state, names...)
				for _, n := range names {
					if _, ok := state[n]; ok {
						t.Fatalf("%s still allocated after its release", n)
					}
				}
				continue
			}
			next := Allocate(state, names...)
			for n, i := range state {
				if next[n] != i {
					t.Fatalf("%s moved from index %d to %d", n, i, next[n])
				}
			}
			seen := map[int32]string{}
			for n, i := range next {
				if other, dup := seen[i]; dup {
					t.Fatalf("index %d given to %s and %s", i, n, other)
				}
				seen[i] = n
			}
			for _, n := range names {
				// Every index below a new machine's was already held.
				if _, had := state[n]; had {
					continue
				}
				for i := range next[n] {
					if owner, held := seen[i]; !held || owner == n {
						t.Fatalf("%s got index %d while %d was free", n, next[n], i)
					}
				}
			}
			state = next
		}
	})
}
