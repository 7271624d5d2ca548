package inplace

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

const (
	oldImage = "registry.example/os:1"
	newImage = "registry.example/os:2"
)

func stored(img string) *infrav1.AnvilMachine {
	return &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "tenant"}, Spec: spec(image(img))}
}

// reimaged is an anvil Machine whose pool has reimaged it to img and runs it.
func reimaged(img string, mut ...func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "tenant", Generation: 3},
		Spec: computev1alpha1.MachineSpec{Image: img, ImageUpdatePolicy: computev1alpha1.ImageUpdatePolicyReimage,
			Power: computev1alpha1.PowerOn},
		Status: computev1alpha1.MachineStatus{ObservedGeneration: 3, State: computev1alpha1.MachineStateRunning,
			Image: &computev1alpha1.BootedImage{Reference: img, Digest: "sha256:" + sha},
			Conditions: []metav1.Condition{
				{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonRunning},
				{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonReimaged, Message: "running " + img},
			}},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

// booting: spec names newImage, the pool still reports oldImage.
func booting(mut ...func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	return reimaged(oldImage, append([]func(*computev1alpha1.Machine){func(m *computev1alpha1.Machine) {
		m.Spec.Image = newImage
		m.Generation = 4
		m.Status.Conditions = m.Status.Conditions[:1]
	}}, mut...)...)
}

func reimaging(status metav1.ConditionStatus, reason, msg string) func(*computev1alpha1.Machine) {
	return func(m *computev1alpha1.Machine) {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: status, Reason: reason, Message: msg})
	}
}

func TestUpdateMachineProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desired string
		am      *infrav1.AnvilMachine
		m       *computev1alpha1.Machine
		want    Outcome
		msg     string // a part of the message
	}{
		{name: "done: the pool runs the new image", desired: newImage, am: stored(newImage), m: reimaged(newImage),
			want: OutcomeDone, msg: "runs " + newImage},
		{name: "done again: the hook is idempotent", desired: newImage, am: stored(newImage), m: reimaged(newImage),
			want: OutcomeDone},
		{name: "the stored AnvilMachine is behind the request", desired: newImage, am: stored(oldImage), m: reimaged(oldImage),
			want: OutcomeInProgress, msg: "waiting for AnvilMachine tenant/m-0 to name image " + newImage},
		{name: "the controller has not carried the image yet", desired: newImage, am: stored(newImage), m: reimaged(oldImage),
			want: OutcomeInProgress, msg: "waiting for the AnvilMachine controller"},
		{name: "the pool has not started", desired: newImage, am: stored(newImage), m: booting(),
			want: OutcomeInProgress, msg: "from " + oldImage + " to " + newImage},
		{name: "the pool reimages", desired: newImage, am: stored(newImage),
			m:    booting(reimaging(metav1.ConditionTrue, computev1alpha1.ReasonReimaging, "booting "+newImage+" in place on MachinePool p")),
			want: OutcomeInProgress, msg: "booting " + newImage + " in place"},
		{name: "the new image is booted but the condition still says reimaging", desired: newImage, am: stored(newImage),
			m: reimaged(newImage, func(m *computev1alpha1.Machine) {
				m.Status.Conditions[1] = metav1.Condition{Type: computev1alpha1.ConditionReimaging, Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonReimaging, Message: "booting"}
			}),
			want: OutcomeInProgress, msg: "booting"},
		{name: "the pool has not reported the new generation", desired: newImage, am: stored(newImage),
			m:    reimaged(newImage, func(m *computev1alpha1.Machine) { m.Generation = 5 }),
			want: OutcomeInProgress, msg: "generation 5"},
		{name: "reimaged, not running yet", desired: newImage, am: stored(newImage),
			m:    reimaged(newImage, func(m *computev1alpha1.Machine) { m.Status.State = computev1alpha1.MachineStatePending }),
			want: OutcomeInProgress, msg: "is Pending"},
		{name: "reimaged and powered off as asked", desired: newImage, am: stored(newImage),
			m: reimaged(newImage, func(m *computev1alpha1.Machine) {
				m.Spec.Power, m.Status.State = computev1alpha1.PowerOff, computev1alpha1.MachineStateShutdown
			}),
			want: OutcomeDone, msg: "powered off"},
		{name: "the image does not resolve: the pool retries", desired: newImage, am: stored(newImage),
			m: booting(func(m *computev1alpha1.Machine) {
				m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: computev1alpha1.ConditionImageReady, Status: metav1.ConditionFalse,
					Reason: computev1alpha1.ReasonImageResolveFailed, Message: "registry.example: timeout", ObservedGeneration: 4})
			}),
			want: OutcomeInProgress, msg: "ImageResolveFailed: registry.example: timeout"},
		{name: "an ImageReady failure of an earlier generation is not this reimage's", desired: newImage, am: stored(newImage),
			m: booting(func(m *computev1alpha1.Machine) {
				m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: computev1alpha1.ConditionImageReady, Status: metav1.ConditionFalse,
					Reason: computev1alpha1.ReasonImageResolveFailed, Message: "old", ObservedGeneration: 2})
			}),
			want: OutcomeInProgress, msg: "pool to reimage it"},
		{name: "failed: the pool refused the image", desired: newImage, am: stored(newImage),
			m:    booting(reimaging(metav1.ConditionFalse, computev1alpha1.ReasonReimageRefused, "MachinePool p refused image "+newImage+": no arm64 entry; the machine keeps running "+oldImage)),
			want: OutcomeFailed, msg: "refused image " + newImage},
		{name: "a refusal of another image is not this update's", desired: newImage, am: stored(newImage),
			m:    booting(reimaging(metav1.ConditionFalse, computev1alpha1.ReasonReimageRefused, "MachinePool p refused image registry.example/os:0")),
			want: OutcomeInProgress},
		{name: "failed: the anvil Machine keeps its image", desired: newImage, am: stored(newImage),
			m:    booting(func(m *computev1alpha1.Machine) { m.Spec.ImageUpdatePolicy = computev1alpha1.ImageUpdatePolicyNever }),
			want: OutcomeFailed, msg: "imageUpdatePolicy Never"},
		{name: "failed: the anvil Machine is gone", desired: newImage, am: stored(newImage), m: nil,
			want: OutcomeFailed, msg: "is gone"},
		{name: "failed: the anvil Machine is being deleted", desired: newImage, am: stored(newImage),
			m:    booting(func(m *computev1alpha1.Machine) { m.DeletionTimestamp = &metav1.Time{} }),
			want: OutcomeFailed, msg: "being deleted"},
		{name: "failed: the machine stopped for good after its reimage", desired: newImage, am: stored(newImage),
			m: reimaged(newImage, func(m *computev1alpha1.Machine) {
				m.Status.State = computev1alpha1.MachineStateTerminated
				m.Status.Conditions[0] = metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Terminated", Message: "kernel panic"}
			}),
			want: OutcomeFailed, msg: "Terminated: kernel panic"},
		{name: "failed: no desired image", desired: "", am: stored(newImage), m: reimaged(newImage),
			want: OutcomeFailed, msg: "names no image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := UpdateMachineProgress(spec(image(tc.desired)), tc.am, tc.m)
			if got.Outcome != tc.want {
				t.Fatalf("outcome %v (%s), want %v", got.Outcome, got.Message, tc.want)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q, want it to contain %q", got.Message, tc.msg)
			}
			if (got.RetryAfterSeconds > 0) != (got.Outcome == OutcomeInProgress) {
				t.Errorf("retryAfterSeconds %d with outcome %v: only an update in progress is asked about again", got.RetryAfterSeconds, got.Outcome)
			}
		})
	}
}
