package attachment

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestReadiness(t *testing.T) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "me", UID: "u-me"}}
	mine := &computev1alpha1.ClaimReference{Name: "me", UID: "u-me"}
	theirs := &computev1alpha1.ClaimReference{Name: "other", UID: "u-other"}
	devs := []device{{name: "root"}, {name: "data", ref: "vol-data"}}
	attachedAll := []computev1alpha1.AttachmentStatus{{Name: "root", State: "Attached"}, {Name: "data", State: "Attached"}}
	cases := []struct {
		name   string
		refs   map[string]referenced
		attach []computev1alpha1.AttachmentStatus
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"missing volume", map[string]referenced{}, attachedAll, metav1.ConditionFalse, ReasonNotFound, "Volume vol-data does not exist"},
		{"held by another", map[string]referenced{"vol-data": {exists: true, holder: theirs}}, attachedAll,
			metav1.ConditionFalse, ReasonInUse, "Volume vol-data is held by Machine other"},
		{"not yet claimed", map[string]referenced{"vol-data": {exists: true}}, nil, metav1.ConditionFalse, ReasonClaiming, "vol-data"},
		{"claimed, not attached", map[string]referenced{"vol-data": {exists: true, holder: mine}},
			[]computev1alpha1.AttachmentStatus{{Name: "root", State: "Attached"}, {Name: "data", State: "Pending"}},
			metav1.ConditionFalse, ReasonAttaching, "attach data"},
		{"all attached", map[string]referenced{"vol-data": {exists: true, holder: mine}}, attachedAll,
			metav1.ConditionTrue, ReasonAttached, "all attached"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := readiness(computev1alpha1.ConditionVolumesReady, "Volume", m, devs, tc.refs, tc.attach)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
				t.Fatalf("got %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.msg)
			}
		})
	}
}
