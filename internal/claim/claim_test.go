package claim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

var t0 = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

func TestHolder(t *testing.T) {
	old := Claimant{Name: "old", UID: "u-old", Created: t0}
	young := Claimant{Name: "young", UID: "u-young", Created: t0.Add(time.Minute)}
	twin := Claimant{Name: "a-twin", UID: "u-twin", Created: t0}
	cases := []struct {
		name      string
		current   *computev1alpha1.ClaimReference
		claimants []Claimant
		want      *computev1alpha1.ClaimReference
	}{
		{"nobody wants it", nil, nil, nil},
		{"oldest wins", nil, []Claimant{young, old}, &computev1alpha1.ClaimReference{Name: "old", UID: "u-old"}},
		{"same age: name decides", nil, []Claimant{old, twin}, &computev1alpha1.ClaimReference{Name: "a-twin", UID: "u-twin"}},
		{"holder keeps it against an older claimant", &computev1alpha1.ClaimReference{Name: "young", UID: "u-young"},
			[]Claimant{old, young}, &computev1alpha1.ClaimReference{Name: "young", UID: "u-young"}},
		{"deleting holder keeps it", &computev1alpha1.ClaimReference{Name: "old", UID: "u-old"},
			[]Claimant{{Name: "old", UID: "u-old", Created: t0, Deleting: true}, young}, &computev1alpha1.ClaimReference{Name: "old", UID: "u-old"}},
		{"deleting claimant gets nothing new", nil,
			[]Claimant{{Name: "old", UID: "u-old", Created: t0, Deleting: true}}, nil},
		{"holder gone: next claimant", &computev1alpha1.ClaimReference{Name: "gone", UID: "u-gone"},
			[]Claimant{young}, &computev1alpha1.ClaimReference{Name: "young", UID: "u-young"}},
		{"recreated with the same name is a new claimant", &computev1alpha1.ClaimReference{Name: "old", UID: "u-before"},
			[]Claimant{old}, &computev1alpha1.ClaimReference{Name: "old", UID: "u-old"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Holder(tc.current, tc.claimants); !Same(got, tc.want) {
				t.Fatalf("Holder = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Whatever the claimants, the holder is one of them (never an outsider), and deciding
// again with the answer as the current holder changes nothing (no flapping).
func TestPropertyHolderIsAClaimantAndStable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(t, "n")
		var cs []Claimant
		for i := 0; i < n; i++ {
			cs = append(cs, Claimant{
				Name: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "name"), UID: computeUID(i),
				Created:  t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "age")) * time.Second),
				Deleting: rapid.Bool().Draw(t, "deleting"),
			})
		}
		h := Holder(nil, cs)
		if h == nil {
			for _, c := range cs {
				if !c.Deleting {
					t.Fatalf("no holder though %s is eligible", c.UID)
				}
			}
			return
		}
		found := false
		for _, c := range cs {
			found = found || string(c.UID) == h.UID
		}
		if !found {
			t.Fatalf("holder %+v is not a claimant", h)
		}
		if again := Holder(h, cs); !Same(again, h) {
			t.Fatalf("holder changed from %+v to %+v with nothing else changed", h, again)
		}
	})
}

func computeUID(i int) types.UID { return types.UID(string(rune('A' + i))) }
