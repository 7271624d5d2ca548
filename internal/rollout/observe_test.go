package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

const (
	tag    = "registry.example:5000/team/os:1"
	digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name, image, annotation, want string
	}{
		{"asked", tag, TargetAnnotation(tag, digest), digest},
		{"the tag spelled otherwise", "docker.io/library/os:1", TargetAnnotation("index.docker.io/library/os:1", digest), digest},
		{"not asked", tag, "", ""},
		{"asked for another tag: the Machine moved since", "registry.example:5000/team/os:2", TargetAnnotation(tag, digest), ""},
		{"the Machine names a digest", "registry.example:5000/team/os@" + digest, TargetAnnotation(tag, digest), ""},
		{"no digest", tag, tag, ""},
		{"a short digest", tag, tag + "@sha256:abc", ""},
		{"another algorithm", tag, tag + "@md5:" + strings.Repeat("a", 32), ""},
		{"garbage", tag, "@@", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &computev1alpha1.Machine{Spec: computev1alpha1.MachineSpec{Image: tc.image}}
			if tc.annotation != "" {
				m.Annotations = map[string]string{imagesv1alpha1.AnnotationRolloutTarget: tc.annotation}
			}
			if got := Target(m); got != tc.want {
				t.Errorf("Target = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	ready := func(s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: computev1alpha1.ConditionReady, Status: s, Reason: "x"}
	}
	refused := func(msg string) metav1.Condition {
		return metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonReimageRefused, Message: msg}
	}
	asked := map[string]string{imagesv1alpha1.AnnotationRolloutTarget: TargetAnnotation(tag, digest), imagesv1alpha1.AnnotationRolloutAskedAt: at.Format(time.RFC3339)}
	for _, tc := range []struct {
		name        string
		power       computev1alpha1.Power
		state       computev1alpha1.MachineState
		conds       []metav1.Condition
		annotations map[string]string
		want        string // available asked refused
	}{
		{"running and Ready", computev1alpha1.PowerOn, computev1alpha1.MachineStateRunning, []metav1.Condition{ready("True")}, nil, "true  "},
		{"running, not Ready", computev1alpha1.PowerOn, computev1alpha1.MachineStateRunning, []metav1.Condition{ready("False")}, nil, "false  "},
		{"booting", computev1alpha1.PowerOn, computev1alpha1.MachineStatePending, nil, nil, "false  "},
		{"shut down against its spec", computev1alpha1.PowerOn, computev1alpha1.MachineStateShutdown, nil, nil, "false  "},
		{"powered off by its spec", computev1alpha1.PowerOff, computev1alpha1.MachineStateShutdown, nil, nil, "true  "},
		{"powered off by its spec, still running", computev1alpha1.PowerOff, computev1alpha1.MachineStateRunning, []metav1.Condition{ready("True")}, nil, "false  "},
		{"asked", computev1alpha1.PowerOn, computev1alpha1.MachineStatePending, nil, asked, "false " + digest + "@" + at.Format(time.RFC3339) + " "},
		{"asked without a time: not asked", computev1alpha1.PowerOn, computev1alpha1.MachineStatePending, nil,
			map[string]string{imagesv1alpha1.AnnotationRolloutTarget: TargetAnnotation(tag, digest)}, "false  "},
		{"asked with a bad time: not asked", computev1alpha1.PowerOn, computev1alpha1.MachineStatePending, nil,
			map[string]string{imagesv1alpha1.AnnotationRolloutTarget: TargetAnnotation(tag, digest), imagesv1alpha1.AnnotationRolloutAskedAt: "yesterday"}, "false  "},
		{"refused", computev1alpha1.PowerOn, computev1alpha1.MachineStateRunning, []metav1.Condition{ready("True"), refused("refused image " + tag + "@" + digest + ": not found")},
			asked, "true " + digest + "@" + at.Format(time.RFC3339) + " refused image " + tag + "@" + digest + ": not found"},
		{"a refusal of an earlier target is not this one's", computev1alpha1.PowerOn, computev1alpha1.MachineStateRunning, []metav1.Condition{ready("True"), refused("refused image " + tag + "@sha256:old")},
			asked, "true " + digest + "@" + at.Format(time.RFC3339) + " "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: tc.annotations},
				Spec:   computev1alpha1.MachineSpec{Image: tag, Power: tc.power, MachinePoolRef: &computev1alpha1.LocalObjectReference{Name: "p"}},
				Status: computev1alpha1.MachineStatus{State: tc.state, Conditions: tc.conds}}
			got := Observe(m, false)
			if got.Name != "m" || got.Pool != "p" {
				t.Errorf("name %q pool %q", got.Name, got.Pool)
			}
			when := ""
			if got.Asked != "" {
				when = got.Asked + "@" + got.AskedAt.UTC().Format(time.RFC3339)
			}
			if s := fmt.Sprintf("%t %s %s", got.Available, when, got.Refused); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}
