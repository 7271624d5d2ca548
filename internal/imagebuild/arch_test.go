package imagebuild

import (
	"testing"
	"time"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

func TestDecideArch(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	created := now.Add(-time.Minute)
	const (
		pending    = imagesv1alpha1.BuildPhasePending
		scheduling = imagesv1alpha1.BuildPhaseScheduling
		building   = imagesv1alpha1.BuildPhaseBuilding
		succeeded  = imagesv1alpha1.BuildPhaseSucceeded
		failed     = imagesv1alpha1.BuildPhaseFailed
		reused     = imagesv1alpha1.BuildPhaseReused
	)
	st := func(phase imagesv1alpha1.BuildPhase, attempts int32) imagesv1alpha1.ArchitectureBuildStatus {
		return imagesv1alpha1.ArchitectureBuildStatus{Architecture: "arm64", Phase: phase, Attempts: attempts}
	}
	running := Builder{Exists: true, Running: true, Created: created}
	off := Builder{Exists: true, PoweredOff: true, Created: created}
	base := ArchObservation{Timeout: 30 * time.Minute, Retries: 1}
	with := func(f func(*ArchObservation)) ArchObservation { o := base; f(&o); return o }

	for _, tc := range []struct {
		name     string
		obs      ArchObservation
		phase    imagesv1alpha1.BuildPhase
		attempts int32
		create   bool
		keep     int32
		reason   string
	}{
		{"new, the hash is in the repository", with(func(o *ArchObservation) { o.Reusable, o.ReusedDigest = true, "sha256:r" }), reused, 0, false, 0, ""},
		{"new: the first attempt", base, pending, 1, true, 1, ""},
		{"pending, create failed or not seen yet: create again (idempotent)", with(func(o *ArchObservation) { o.Status = st(pending, 1) }), pending, 1, true, 1, ""},
		{"builder waits for a pool", with(func(o *ArchObservation) {
			o.Status, o.Builder = st(pending, 1), Builder{Exists: true, Created: created, Unschedulable: "no pool runs arm64"}
		}), scheduling, 1, false, 1, "Unschedulable"},
		{"builder runs", with(func(o *ArchObservation) { o.Status, o.Builder = st(scheduling, 1), running }), building, 1, false, 1, ""},
		{"builder powered off without a result", with(func(o *ArchObservation) { o.Status, o.Builder = st(building, 1), off }), pending, 2, true, 2, "NoResult"},
		{"result pushed while the builder still runs", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome, o.Digest = st(building, 1), running, OutcomeSucceeded, "sha256:d"
		}), succeeded, 1, false, 0, ""},
		{"succeeded: the builder goes", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome, o.Digest = st(building, 1), off, OutcomeSucceeded, "sha256:d"
		}), succeeded, 1, false, 0, ""},
		{"a step failed: no retry", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome, o.Message = st(building, 1), off, OutcomeStepFailed, "line 2: RUN false"
		}), failed, 1, false, 0, "StepFailed"},
		{"a step failed, keepFailed", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome, o.KeepFailed = st(building, 1), off, OutcomeStepFailed, true
		}), failed, 1, false, 1, "StepFailed"},
		{"error, a retry left: the next attempt replaces the builder", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome = st(building, 1), off, OutcomeError
		}), pending, 2, true, 2, "BuildError"},
		{"error, no retry left", with(func(o *ArchObservation) {
			o.Status, o.Builder, o.Outcome = st(building, 2), off, OutcomeError
		}), failed, 2, false, 0, "BuildError"},
		{"timeout", with(func(o *ArchObservation) {
			o.Status, o.Builder = st(building, 1), Builder{Exists: true, Running: true, Created: now.Add(-31 * time.Minute)}
		}), pending, 2, true, 2, "Timeout"},
		{"builder deleted under us", with(func(o *ArchObservation) { o.Status = st(building, 1) }), pending, 2, true, 2, "BuilderLost"},
		{"restarted controller adopts the running builder", with(func(o *ArchObservation) {
			o.HighestAttempt, o.Builder = 2, running
		}), building, 2, false, 2, ""},
		{"finished stays finished and drops its builder", with(func(o *ArchObservation) {
			o.Status, o.Builder = st(succeeded, 1), off
		}), succeeded, 1, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideArch(tc.obs, now)
			if d.Status.Phase != tc.phase || d.Status.Attempts != tc.attempts || d.Create != tc.create ||
				d.Keep != tc.keep || d.Status.Reason != tc.reason {
				t.Errorf("got phase %s attempts %d create %v keep %d reason %q; want %s %d %v %d %q",
					d.Status.Phase, d.Status.Attempts, d.Create, d.Keep, d.Status.Reason,
					tc.phase, tc.attempts, tc.create, tc.keep, tc.reason)
			}
			if d.Status.Phase.Done() && d.Status.CompletionTime == nil {
				t.Error("a final phase without a completion time")
			}
		})
	}
}

// The same observation twice gives the same decision: the controller may decide again.
func TestDecideArchIsIdempotent(t *testing.T) {
	now := time.Now()
	o := ArchObservation{Timeout: time.Minute, Retries: 1}
	first := DecideArch(o, now)
	o.Status = first.Status
	second := DecideArch(o, now)
	if second.Status.Attempts != first.Status.Attempts || !second.Create {
		t.Errorf("deciding again from the written status changed the attempt: %+v then %+v", first, second)
	}
}
