package imagebuild

import (
	"reflect"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

func TestPublish(t *testing.T) {
	const (
		all   = imagesv1alpha1.PublishAllArchitectures
		carry = imagesv1alpha1.PublishCarryForward
	)
	ok := func(a, d string) Result { return Result{a, imagesv1alpha1.BuildPhaseSucceeded, d} }
	reused := func(a, d string) Result { return Result{a, imagesv1alpha1.BuildPhaseReused, d} }
	failed := func(a string) Result { return Result{Architecture: a, Phase: imagesv1alpha1.BuildPhaseFailed} }
	building := func(a string) Result { return Result{Architecture: a, Phase: imagesv1alpha1.BuildPhaseBuilding} }
	prev := map[string]string{"arm64": "sha256:old-arm"}
	for _, tc := range []struct {
		name    string
		policy  imagesv1alpha1.PublishPolicy
		results []Result
		prev    map[string]string
		want    Publication
	}{
		{"all done", all, []Result{ok("amd64", "A"), reused("arm64", "R")}, nil,
			Publication{Entries: map[string]string{"amd64": "A", "arm64": "R"}}},
		{"one still building", carry, []Result{ok("amd64", "A"), building("arm64")}, prev, Publication{Wait: true}},
		{"a failure stops AllArchitectures", all, []Result{ok("amd64", "A"), failed("arm64")}, prev,
			Publication{Missing: []string{"arm64"}}},
		{"CarryForward keeps the previous entry", carry, []Result{ok("amd64", "A"), failed("arm64")}, prev,
			Publication{Entries: map[string]string{"amd64": "A", "arm64": "sha256:old-arm"}, CarriedForward: []string{"arm64"}}},
		{"CarryForward without a previous entry leaves it out", carry, []Result{ok("amd64", "A"), failed("arm64")}, nil,
			Publication{Entries: map[string]string{"amd64": "A"}, Missing: []string{"arm64"}}},
		{"nothing succeeded", carry, []Result{failed("amd64")}, nil, Publication{Missing: []string{"amd64"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Publish(tc.policy, tc.results, tc.prev); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Publish() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTargetArchitectures(t *testing.T) {
	as := func(s ...computev1alpha1.Architecture) []computev1alpha1.Architecture { return s }
	for _, tc := range []struct {
		name                  string
		spec, fleet, previous []computev1alpha1.Architecture
		want                  []computev1alpha1.Architecture
	}{
		{"the spec's set, whatever the fleet", as("arm64", "amd64"), as("s390x"), as("riscv64"), as("amd64", "arm64")},
		{"empty: the fleet's", nil, as("arm64", "amd64", "arm64"), nil, as("amd64", "arm64")},
		{"a pool going away removes nothing", nil, as("amd64"), as("arm64"), as("amd64", "arm64")},
		{"no pools, nothing built", nil, nil, nil, []computev1alpha1.Architecture{}},
	} {
		if got := TargetArchitectures(tc.spec, tc.fleet, tc.previous); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNamesFitTheirLimits(t *testing.T) {
	long := strings.Repeat("a", 253)
	hashes := map[string]string{"amd64": strings.Repeat("0", 64), "ppc64le": strings.Repeat("1", 64)}
	b := BuildName(long, hashes)
	if m := BuilderName(b, "ppc64le", 10); len(m) > 63 {
		t.Errorf("builder Machine name %q is %d characters, over a DNS label's 63", m, len(m))
	}
	if BuildName("os", hashes) == BuildName("os", map[string]string{"amd64": strings.Repeat("0", 64)}) {
		t.Error("a build of fewer architectures has the same name")
	}
	if tag := HashTag("ppc64le", hashes["ppc64le"]); len(tag) > 128 {
		t.Errorf("tag %q over 128 characters", tag)
	}
}
