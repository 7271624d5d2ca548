package machineplan

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

func listed(id, uid string, created int64, deleting bool) *mriv1alpha1.Machine {
	rm := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: id, CreatedAtUnixNano: created,
		Labels: map[string]string{mri.LabelMachineUID: uid}}}
	if deleting {
		rm.Metadata.DeletedAtUnixNano = 1
	}
	return rm
}

func TestSort(t *testing.T) {
	for _, tc := range []struct {
		name       string
		list       []*mriv1alpha1.Machine
		uid        types.UID
		held       bool
		mine       string
		del, kept  []string
		duplicates int
	}{
		{name: "one of its own", list: []*mriv1alpha1.Machine{listed("a", "u", 1, false)}, uid: "u", mine: "a"},
		{name: "the oldest of duplicates is kept", uid: "u", mine: "b", del: []string{"a", "c"}, duplicates: 2,
			list: []*mriv1alpha1.Machine{listed("a", "u", 2, false), listed("b", "u", 1, false), listed("c", "u", 2, false)}},
		{name: "an earlier Machine's is garbage; one being deleted is not asked again", uid: "u", mine: "b", del: []string{"a"},
			list: []*mriv1alpha1.Machine{listed("a", "old", 1, false), listed("b", "u", 5, false), listed("c", "old", 1, true)}},
		{name: "orphans held: kept, but duplicates still go", uid: "u", held: true, mine: "b", del: []string{"c"}, kept: []string{"a"}, duplicates: 1,
			list: []*mriv1alpha1.Machine{listed("a", "old", 1, false), listed("b", "u", 5, false), listed("c", "u", 6, false)}},
		{name: "the Machine is gone: all of it is garbage", del: []string{"a", "b"},
			list: []*mriv1alpha1.Machine{listed("a", "u", 1, false), listed("b", "", 1, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Sort(tc.list, tc.uid, tc.held)
			if got := s.Mine.GetMetadata().GetId(); got != tc.mine {
				t.Errorf("mine %q, want %q", got, tc.mine)
			}
			slices.Sort(s.Delete)
			if !slices.Equal(s.Delete, tc.del) || !slices.Equal(s.Kept, tc.kept) || s.Duplicates != tc.duplicates {
				t.Errorf("delete %v kept %v duplicates %d, want %v %v %d", s.Delete, s.Kept, s.Duplicates, tc.del, tc.kept, tc.duplicates)
			}
		})
	}
}

// Sort never deletes the machine it keeps for the Machine, keeps one whenever the
// Machine has any, deletes nothing of another Machine while orphans are held, and asks
// every other machine not already being deleted to go.
func TestSortProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(t, "n")
		var list []*mriv1alpha1.Machine
		for i := range n {
			list = append(list, listed(string(rune('a'+i)), rapid.SampledFrom([]string{"u", "old", ""}).Draw(t, "uid"),
				rapid.Int64Range(1, 3).Draw(t, "created"), rapid.Bool().Draw(t, "deleting")))
		}
		uid := types.UID(rapid.SampledFrom([]string{"u", ""}).Draw(t, "machine uid"))
		held := rapid.Bool().Draw(t, "held")
		s := Sort(list, uid, held)
		own := 0
		for _, rm := range list {
			id, mine := rm.GetMetadata().GetId(), uid != "" && rm.GetMetadata().GetLabels()[mri.LabelMachineUID] == string(uid)
			deleted := slices.Contains(s.Delete, id)
			switch {
			case s.Mine == rm && deleted:
				t.Fatalf("deletes the machine it keeps, %s", id)
			case !mine && held && deleted:
				t.Fatalf("deletes %s of another Machine while orphans are held", id)
			case s.Mine != rm && (mine || !held) && rm.GetMetadata().GetDeletedAtUnixNano() == 0 && !deleted:
				t.Fatalf("leaves %s, neither kept nor deleted", id)
			case rm.GetMetadata().GetDeletedAtUnixNano() != 0 && deleted:
				t.Fatalf("asks %s to go again", id)
			}
			if mine {
				own++
			}
		}
		if own > 0 && s.Mine == nil {
			t.Fatalf("none kept of the Machine's %d", own)
		}
	})
}
