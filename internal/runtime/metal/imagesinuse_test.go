package metal

import (
	"context"
	"slices"
	"testing"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// A runtime with --max-cache-size keeps the image of every Host its machines hold (the
// server may download it again: a redeploy, a wipe's retry), and lets go of it with the
// machine.
func TestImageChecksumsInUseFollowTheMachines(t *testing.T) {
	s := newSite(t, 1)
	rt := s.mustStart(t)
	if got := rt.ImageChecksumsInUse(); len(got) != 0 {
		t.Fatalf("in use before any machine: %v", got)
	}
	id := createMachine(t, rt.Runtime, s.machine("web", s.spec("os"))).Metadata.Id
	await(t, rt.Runtime, id, "ran", isRunning)
	if got, want := rt.ImageChecksumsInUse(), s.images["os"].Disk; !slices.Equal(got, []string{want}) {
		t.Fatalf("in use with the machine on its Host: %v, want its disk %s", got, want)
	}
	if _, err := rt.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "deleted", gone)
	if got := rt.ImageChecksumsInUse(); len(got) != 0 {
		t.Fatalf("in use after the machine was deleted: %v", got)
	}
}
