package inplace

import (
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// Outcome is how far an in-place update has come.
type Outcome int

const (
	// OutcomeUnspecified is the zero value, never returned: a Progress without an outcome
	// is not "done".
	OutcomeUnspecified Outcome = iota
	// OutcomeInProgress: ask again after RetryAfterSeconds.
	OutcomeInProgress
	// OutcomeDone: the machine runs the desired image.
	OutcomeDone
	// OutcomeFailed: the update cannot end without a change; Message says what to change.
	OutcomeFailed
)

// RetryAfterSeconds is how soon Cluster API asks again about an update in progress. A
// reimage takes seconds on a VM and minutes on a server; Cluster API's Machine controller
// also looks again on its own watches.
const RetryAfterSeconds = 5

// Progress is the answer to UpdateMachine.
type Progress struct {
	Outcome Outcome
	// RetryAfterSeconds is set (positive) only when Outcome is OutcomeInProgress.
	RetryAfterSeconds int32
	// Message says what the update is at or why it failed.
	Message string
}

// UpdateMachineProgress says how far the in-place update of am to the image desired (the
// AnvilMachine spec in Cluster API's UpdateMachine request) has come, from am as stored
// and its anvil Machine m (nil if there is none). It never asks for a write: the
// AnvilMachine controller sets the anvil Machine's image from am, and the machine's pool
// reimages it (Reimaging True, then False Reimaged, status.image naming the new image).
//
// ImageUpToDate is not read: the OSImage controller writes it after the pool's report, and
// status.image with Reimaging already say what it would.
func UpdateMachineProgress(desired infrav1.AnvilMachineSpec, am *infrav1.AnvilMachine, m *computev1alpha1.Machine) Progress {
	want := desired.Image
	switch {
	case want == "":
		return failed("the desired AnvilMachine %s/%s names no image", am.Namespace, am.Name)
	case am.Spec.Image != want:
		// Cluster API writes the AnvilMachine before it asks; a cache may lag behind it.
		return inProgress("waiting for AnvilMachine %s/%s to name image %s (it names %s)", am.Namespace, am.Name, want, am.Spec.Image)
	case m == nil:
		return failed("anvil Machine of AnvilMachine %s/%s is gone: it cannot be reimaged; delete the Cluster API Machine to replace it", am.Namespace, am.Name)
	}
	key := m.Namespace + "/" + m.Name
	switch {
	case m.DeletionTimestamp != nil:
		return failed("anvil Machine %s is being deleted: it cannot be reimaged", key)
	case m.Spec.Image != want:
		return inProgress("waiting for the AnvilMachine controller to set anvil Machine %s's image to %s", key, want)
	}
	reimaging := apimeta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging)
	booted := ""
	if m.Status.Image != nil {
		booted = m.Status.Image.Reference
	}
	if booted != want {
		switch {
		case refused(reimaging, want):
			return failed("anvil Machine %s: %s", key, reimaging.Message)
		case m.Spec.ImageUpdatePolicy == computev1alpha1.ImageUpdatePolicyNever:
			return failed("anvil Machine %s has imageUpdatePolicy Never and keeps %s: set it to Reimage to update it in place", key, orUnknown(booted))
		case reimaging != nil && reimaging.Status == metav1.ConditionTrue:
			return inProgress("anvil Machine %s: %s", key, reimaging.Message)
		}
		if c := blocked(m); c != nil {
			// The pool retries these (a registry or a Secret may come back): not a failure.
			return inProgress("anvil Machine %s cannot be reimaged to %s yet: %s %s: %s", key, want, c.Type, c.Reason, c.Message)
		}
		return inProgress("waiting for anvil Machine %s's pool to reimage it from %s to %s", key, orUnknown(booted), want)
	}
	switch {
	case reimaging != nil && reimaging.Status == metav1.ConditionTrue:
		return inProgress("anvil Machine %s: %s", key, reimaging.Message)
	case m.Status.ObservedGeneration < m.Generation:
		return inProgress("waiting for anvil Machine %s's pool to report generation %d", key, m.Generation)
	case m.Status.State == computev1alpha1.MachineStateTerminated:
		return failed("anvil Machine %s stopped for good after its reimage to %s: %s", key, want, readyMessage(m))
	case m.Spec.Power == computev1alpha1.PowerOff && m.Status.State == computev1alpha1.MachineStateShutdown:
		return Progress{Outcome: OutcomeDone, Message: fmt.Sprintf("anvil Machine %s has image %s and is powered off, as its spec asks", key, want)}
	case m.Status.State != computev1alpha1.MachineStateRunning:
		return inProgress("anvil Machine %s has image %s and is %s: waiting for it to run", key, want, orUnknown(string(m.Status.State)))
	}
	return Progress{Outcome: OutcomeDone, Message: fmt.Sprintf("anvil Machine %s runs %s", key, want)}
}

// refused says whether c is the pool's refusal of image want. The poollet's message names
// the image it refused: a refusal left from an earlier image is not this one's.
func refused(c *metav1.Condition, want string) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonReimageRefused &&
		strings.Contains(c.Message, want)
}

// blocked is the condition by which the pool says, for the Machine's current generation,
// that it cannot start the reimage yet: the image does not resolve, or the first-boot
// config is missing.
func blocked(m *computev1alpha1.Machine) *metav1.Condition {
	for _, t := range []string{computev1alpha1.ConditionImageReady, computev1alpha1.ConditionIgnitionReady} {
		if c := apimeta.FindStatusCondition(m.Status.Conditions, t); c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == m.Generation {
			return c
		}
	}
	return nil
}

func readyMessage(m *computev1alpha1.Machine) string {
	if c := apimeta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReady); c != nil && c.Message != "" {
		return c.Reason + ": " + c.Message
	}
	return "its pool gives no reason"
}

func orUnknown(s string) string {
	if s == "" {
		return "(not reported yet)"
	}
	return s
}

func inProgress(format string, args ...any) Progress {
	return Progress{Outcome: OutcomeInProgress, RetryAfterSeconds: RetryAfterSeconds, Message: fmt.Sprintf(format, args...)}
}

func failed(format string, args ...any) Progress {
	return Progress{Outcome: OutcomeFailed, Message: fmt.Sprintf(format, args...)}
}
