package imagebuild

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestImageUpToDate(t *testing.T) {
	const img = "127.0.0.1:5000/team/os:v1"
	booted := computev1alpha1.BootedImage{Reference: img, Digest: "sha256:index1"}
	output := func(published, entry string) Currency {
		return Currency{SpecImage: img, Booted: booted, Architecture: "arm64", Output: true, OSImage: "os", Published: published, BootedEntry: entry}
	}
	unreadable := output("sha256:new", "")
	unreadable.EntryError = errors.New("registry down")
	for _, tc := range []struct {
		name   string
		in     Currency
		status metav1.ConditionStatus // "" means no condition
		reason string
		says   string
	}{
		{"not an OSImage output, unchanged", Currency{SpecImage: img, Booted: booted}, "", "", ""},
		{"spec.image changed", Currency{SpecImage: "127.0.0.1:5000/team/os:v2", Booted: booted},
			metav1.ConditionFalse, computev1alpha1.ReasonImageChanged, "runs 127.0.0.1:5000/team/os:v1"},
		{"spec.image changed beats an output's verdict", func() Currency { r := output("sha256:e", "sha256:e"); r.SpecImage += "x"; return r }(),
			metav1.ConditionFalse, computev1alpha1.ReasonImageChanged, "being reimaged"},
		{"spec.image changed under policy Never", Currency{SpecImage: "127.0.0.1:5000/team/os:v2", Booted: booted, Never: true},
			metav1.ConditionFalse, computev1alpha1.ReasonImageChanged, "imageUpdatePolicy Never keeps the booted image"},
		{"runs the published entry", output("sha256:e", "sha256:e"), metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent, "sha256:e"},
		{"a newer entry is published", output("sha256:new", "sha256:old"),
			metav1.ConditionFalse, computev1alpha1.ReasonNewerImagePublished, "publishes sha256:new for arm64; the machine runs sha256:old: the OSImage's rollout reimages it"},
		{"a newer entry is published, policy Never", func() Currency { r := output("sha256:new", "sha256:old"); r.Never = true; return r }(),
			metav1.ConditionFalse, computev1alpha1.ReasonNewerImagePublished, "imageUpdatePolicy Never keeps it out of the OSImage's rollout"},
		{"nothing published for its architecture", output("", ""), metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent, "no arm64 entry"},
		{"the booted index cannot be read", unreadable, metav1.ConditionUnknown, computev1alpha1.ReasonImageUnknown, "registry down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ImageUpToDate(tc.in)
			if tc.status == "" {
				if got != nil {
					t.Fatalf("want no condition, got %+v", got)
				}
				return
			}
			if got == nil || got.Status != tc.status || got.Reason != tc.reason || !strings.Contains(got.Message, tc.says) {
				t.Fatalf("want %s/%s saying %q, got %+v", tc.status, tc.reason, tc.says, got)
			}
			if got.Type != computev1alpha1.ConditionImageUpToDate {
				t.Fatalf("type %q", got.Type)
			}
		})
	}
}

func TestTagName(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000/team/os:v1": "127.0.0.1:5000/team/os:v1",
		"127.0.0.1:5000/team/os":    "127.0.0.1:5000/team/os:latest",
		"busybox":                   "index.docker.io/library/busybox:latest",
		"127.0.0.1:5000/team/os@sha256:" + strings.Repeat("a", 64): "",
		"UPPER/case:x": "",
	} {
		if got := TagName(in); got != want {
			t.Errorf("TagName(%q) = %q, want %q", in, got, want)
		}
	}
}
