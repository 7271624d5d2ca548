package imagebuild

import (
	"fmt"
	"time"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// Builder is what was observed of the current attempt's builder Machine.
type Builder struct {
	// Exists: the Machine is there and not being deleted.
	Exists bool
	// Running: the guest is up; PoweredOff: it ran and has powered itself off.
	Running, PoweredOff bool
	// Created is when the Machine was created.
	Created time.Time
	// Unschedulable is the scheduler's refusal, empty while it has none.
	Unschedulable string
}

// Outcome is what the attempt's log artifact says.
type Outcome int

const (
	OutcomeUnknown    Outcome = iota // no log artifact (yet)
	OutcomeSucceeded                 // pushed the image
	OutcomeStepFailed                // a recipe step failed: retrying would fail again
	OutcomeError                     // failed for a reason outside the recipe
)

// ResultPoll is how often a running builder's result is looked for in the registry, which
// has no watch; the builder Machine powering off is the other way an attempt's end is seen.
const ResultPoll = 10 * time.Second

// ArchObservation is everything one architecture's decision reads.
type ArchObservation struct {
	Status imagesv1alpha1.ArchitectureBuildStatus
	// HighestAttempt is the highest attempt of any builder Machine found by its labels: a
	// restarted controller learns of attempts it had not recorded.
	HighestAttempt int32
	// Reusable: the output repository has an image under this architecture's hash tag
	// (looked up only before the first attempt); ReusedDigest is its digest.
	Reusable     bool
	ReusedDigest string
	// Builder is the current attempt's Machine.
	Builder Builder
	// Outcome of the current attempt as its log artifact says, read whenever its builder
	// exists, with its digest or message and the log's tail.
	Outcome Outcome
	Digest  string
	Message string
	LogTail string
	// Timeout of one attempt; Retries after the first; KeepFailed keeps a failed builder.
	Timeout    time.Duration
	Retries    int32
	KeepFailed bool
}

// ArchDecision is the architecture's next status and what to do to get there.
type ArchDecision struct {
	Status imagesv1alpha1.ArchitectureBuildStatus
	// Create the current attempt's (Status.Attempts) builder Machine; it is idempotent.
	Create bool
	// Keep is the attempt whose builder Machine stays; every other builder Machine of the
	// architecture is deleted (0: all of them).
	Keep int32
	// WakeAt is when to look again without an event (the attempt's deadline).
	WakeAt time.Time
}

// DecideArch is one architecture's build as a pure function of what was observed: the
// status to write and the actions that move it on. The controller carries them out and
// writes the status; the next observation shows the result.
func DecideArch(o ArchObservation, now time.Time) ArchDecision {
	st := o.Status
	if o.HighestAttempt > st.Attempts {
		st.Attempts = o.HighestAttempt
	}
	switch st.Phase {
	case imagesv1alpha1.BuildPhaseReused, imagesv1alpha1.BuildPhaseSucceeded, imagesv1alpha1.BuildPhaseFailed:
		return finished(st, o, now)
	case "":
		if o.Reusable {
			st.Phase, st.Digest = imagesv1alpha1.BuildPhaseReused, o.ReusedDigest
			return finished(st, o, now)
		}
		if st.Attempts == 0 {
			st.Attempts = 1
		}
		st.Phase = imagesv1alpha1.BuildPhasePending
		t := metav1Time(now)
		st.StartTime = &t
	}
	if !o.Builder.Exists {
		if st.Phase == imagesv1alpha1.BuildPhasePending {
			return ArchDecision{Status: st, Create: true, Keep: st.Attempts}
		}
		return retryOrFail(st, o, "BuilderLost", "the builder Machine disappeared before the build ended", now)
	}
	deadline := o.Builder.Created.Add(o.Timeout)
	if o.Outcome != OutcomeUnknown {
		st.LogTail = o.LogTail
	}
	switch {
	case o.Outcome == OutcomeSucceeded:
		st.Phase, st.Digest, st.Reason, st.Message = imagesv1alpha1.BuildPhaseSucceeded, o.Digest, "", ""
		return finished(st, o, now)
	case o.Outcome == OutcomeStepFailed:
		st.Phase, st.Reason, st.Message = imagesv1alpha1.BuildPhaseFailed, "StepFailed", o.Message
		return finished(st, o, now)
	case o.Outcome == OutcomeError:
		return retryOrFail(st, o, "BuildError", o.Message, now)
	case o.Builder.PoweredOff:
		return retryOrFail(st, o, "NoResult", "the builder powered off without pushing a result", now)
	case o.Timeout > 0 && !now.Before(deadline):
		return retryOrFail(st, o, "Timeout", fmt.Sprintf("the attempt took longer than %s", o.Timeout), now)
	case o.Builder.Running:
		st.Phase, st.Reason, st.Message = imagesv1alpha1.BuildPhaseBuilding, "", ""
	default:
		st.Phase, st.Reason, st.Message = imagesv1alpha1.BuildPhaseScheduling, "", ""
		if o.Builder.Unschedulable != "" {
			st.Reason, st.Message = "Unschedulable", o.Builder.Unschedulable
		}
	}
	wake := now.Add(ResultPoll)
	if o.Timeout > 0 && deadline.Before(wake) {
		wake = deadline
	}
	return ArchDecision{Status: st, Keep: st.Attempts, WakeAt: wake}
}

// finished settles a final phase: its builder goes, unless a failed one is to be kept.
func finished(st imagesv1alpha1.ArchitectureBuildStatus, o ArchObservation, now time.Time) ArchDecision {
	if st.CompletionTime == nil {
		t := metav1Time(now)
		st.CompletionTime = &t
	}
	d := ArchDecision{Status: st}
	if st.Phase == imagesv1alpha1.BuildPhaseFailed && o.KeepFailed {
		d.Keep = st.Attempts
	}
	return d
}

// retryOrFail ends an attempt that failed for a reason outside the recipe: the next
// attempt starts while retries last, else the architecture fails.
func retryOrFail(st imagesv1alpha1.ArchitectureBuildStatus, o ArchObservation, reason, msg string, now time.Time) ArchDecision {
	st.Reason, st.Message = reason, msg
	if st.Attempts > o.Retries { // the first attempt and Retries more have run
		st.Phase = imagesv1alpha1.BuildPhaseFailed
		return finished(st, o, now)
	}
	st.Attempts++
	st.Phase = imagesv1alpha1.BuildPhasePending
	return ArchDecision{Status: st, Create: true, Keep: st.Attempts}
}
