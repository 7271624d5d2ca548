package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/mri"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		name, uid, want, err string
	}{
		{name: "a uid names the object", uid: testUID, want: testUID},
		{name: "no uid label", uid: "", err: "is not set"},
		{name: "upper case", uid: "ABC", err: "cannot name a downstream Machine"},
		{name: "too long", uid: strings.Repeat("a", 254), err: "cannot name a downstream Machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{}
			if tc.uid != "" {
				labels[mri.LabelMachineUID] = tc.uid
			}
			got, err := Name(labels)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Name: %v, want an ErrInvalid saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Name = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestObjectLabelsNameBrokerAndUpstream(t *testing.T) {
	l := ObjectLabels("p", "u")
	if l[LabelPool] != "p" || l[LabelUpstreamUID] != "u" || len(l) != 2 {
		t.Fatalf("ObjectLabels = %v", l)
	}
}
