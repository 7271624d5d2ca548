package conformance

import (
	"maps"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// reimage: ReimageMachine checks the image before changing anything, then boots the
// machine from it with its id, labels, volumes and NICs kept, in the power state it was
// in (E8), across a restart of the runtime (R2); the same image again changes nothing (E3).
func (s *suite) reimage(t *testing.T) {
	other := s.target.OtherImage
	if other == nil {
		t.Fatal("the target sets no OtherImage: the suite cannot check ReimageMachine")
	}
	m := s.create(t, s.newMachine(t))
	id := m.Metadata.Id
	m = s.await(t, id, "ran", settledIn(running))
	before := clone(m)

	reimage := func(img *mriv1alpha1.Image, fb *mriv1alpha1.FirstBootConfig) (*mriv1alpha1.Machine, error) {
		resp, err := s.c.ReimageMachine(ctx(t), &mriv1alpha1.ReimageMachineRequest{Id: id, Image: img, FirstBoot: fb})
		return resp.GetMachine(), err
	}
	for _, tc := range []struct {
		what   string
		img    *mriv1alpha1.Image
		code   codes.Code
		reason mriv1alpha1.ErrorReason
	}{
		{"no digest", &mriv1alpha1.Image{Reference: other.Reference}, codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID},
		{"a missing image", s.target.MissingImage, codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND},
		{"an image without the machine's architecture", s.target.WrongArchImage, codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE},
	} {
		if tc.img == nil {
			t.Fatalf("the target sets no image for %s", tc.what)
		}
		_, err := reimage(tc.img, nil)
		wantReason(t, err, tc.code, tc.reason)
	}
	if got := s.get(t, id); got.Metadata.Generation != before.Metadata.Generation || !proto.Equal(got.Spec, before.Spec) {
		t.Fatalf("refused reimages changed the machine: generation %d, spec %v", got.Metadata.Generation, got.Spec)
	}

	// The same image: nothing changes (E3).
	if got, err := reimage(before.Spec.Image, nil); err != nil || got.Metadata.Generation != before.Metadata.Generation {
		t.Fatalf("reimaging to the image it runs: %v, generation %d, want %d unchanged", err, got.GetMetadata().GetGeneration(), before.Metadata.Generation)
	}

	// Another image: the generation goes up, the machine runs it, the rest is as it was.
	got, err := reimage(other, nil)
	if err != nil {
		t.Fatalf("ReimageMachine: %v", err)
	}
	if got.Metadata.Generation <= before.Metadata.Generation || !proto.Equal(got.Spec.Image, other) {
		t.Errorf("reimage returned generation %d and image %v, want above %d and %v (E4)", got.Metadata.Generation, got.Spec.Image, before.Metadata.Generation, other)
	}
	// The runtime restarts at once, mid-reimage: the reimage is finished after it (R2).
	s.c = s.target.Restart(t)
	after := s.await(t, id, "ran the other image", func(m *mriv1alpha1.Machine) bool {
		return settledIn(running)(m) && proto.Equal(m.Spec.Image, other)
	})
	s.sameMachine(t, before, after)
	if !proto.Equal(after.Spec.FirstBoot, before.Spec.FirstBoot) {
		t.Errorf("a reimage without first_boot changed it to %v", after.Spec.FirstBoot)
	}
	if again, err := reimage(other, nil); err != nil || again.Metadata.Generation != after.Metadata.Generation {
		t.Errorf("repeating the reimage: %v, generation %d, want %d (E3)", err, again.GetMetadata().GetGeneration(), after.Metadata.Generation)
	}

	// Back to the first image with new first-boot data, powered off: it stays off.
	if _, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	s.await(t, id, "shut down", settledIn(shutdown))
	fb := clone(before.Spec.FirstBoot)
	if fb == nil {
		fb = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT}
	}
	fb.Data = append(append([]byte{}, fb.Data...), "\n# reimaged\n"...)
	if _, err := reimage(before.Spec.Image, fb); err != nil {
		t.Fatalf("ReimageMachine of a machine that is off: %v", err)
	}
	off := s.await(t, id, "reimaged while off", func(m *mriv1alpha1.Machine) bool {
		return settledIn(shutdown)(m) && proto.Equal(m.Spec.Image, before.Spec.Image)
	})
	if !proto.Equal(off.Spec.FirstBoot, fb) {
		t.Errorf("first_boot after a reimage that set it: %v, want %v", off.Spec.FirstBoot, fb)
	}
	s.sameMachine(t, before, off)
}

// sameMachine checks that after is before's machine: id, labels, volumes and NICs kept.
func (s *suite) sameMachine(t *testing.T, before, after *mriv1alpha1.Machine) {
	t.Helper()
	if after.Metadata.Id != before.Metadata.Id || !maps.Equal(after.Metadata.Labels, before.Metadata.Labels) {
		t.Errorf("after the reimage: id %s labels %v, want %s %v", after.Metadata.Id, after.Metadata.Labels, before.Metadata.Id, before.Metadata.Labels)
	}
	allAttached(t, before.Spec, after, " after the reimage")
}
