package mapping

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/anvil-dev/anvil/internal/mri"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		name, uid, want string
	}{
		{name: "a Kubernetes UID names the object", uid: testUID, want: testUID},
		{name: "upper case: hashed", uid: "ABC", want: "uid-b5d4045c3f466fa91fe2cc6abe79232a1a57cdf1"},
		{name: "a test name: hashed", uid: "TestConformance/I2-1-17", want: "uid-"},
		{name: "too long for a label value: hashed", uid: strings.Repeat("a", 64), want: "uid-"},
		{name: "looks like a hash: hashed", uid: "uid-b5d4045c3f466fa91fe2cc6abe79232a1a57cdf1", want: "uid-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Name(map[string]string{mri.LabelMachineUID: tc.uid})
			if err != nil || !strings.HasPrefix(got, tc.want) || len(validation.IsDNS1123Label(got)) > 0 {
				t.Fatalf("Name(%q) = %q, %v; want %q…, a DNS label", tc.uid, got, err, tc.want)
			}
			if strings.HasPrefix(tc.uid, "uid-") && got == tc.uid {
				t.Fatal("a uid shaped like a hash named itself")
			}
			again, _ := Name(map[string]string{mri.LabelMachineUID: tc.uid})
			if again != got {
				t.Fatal("Name is not deterministic")
			}
		})
	}
	if _, err := Name(nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is not set") {
		t.Fatalf("Name without a uid: %v", err)
	}
}

func TestObjectLabelsNameBrokerAndUpstream(t *testing.T) {
	l := ObjectLabels("p", "u")
	if l[LabelPool] != "p" || l[LabelUpstreamUID] != "u" || len(l) != 2 {
		t.Fatalf("ObjectLabels = %v", l)
	}
}
