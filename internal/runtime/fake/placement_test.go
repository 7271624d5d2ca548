package fake

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// The fake keeps spec.placement as it was given (contract P1: it places nothing, so it
// only keeps it), and a restart on its state file keeps it too: a test of a caller
// (the poollet) reads back what it sent.
func TestSpecPlacementIsKeptAsGiven(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state.json")
	want := &mriv1alpha1.Placement{NativeOnly: true, Tolerations: []*mriv1alpha1.Toleration{
		{Key: "gpu", Operator: "Equal", Value: "a100", Effect: "NoSchedule"}, {Operator: "Exists"}}}
	m := machineWithUID("u1")
	m.Spec.Placement = want
	r := newRuntime(t, Config{StateFile: state})
	resp, err := r.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: m})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetMachine().GetSpec().GetPlacement(); !proto.Equal(got, want) {
		t.Fatalf("created machine's spec.placement = %v, want %v", got, want)
	}
	r.Close()
	r = newRuntime(t, Config{StateFile: state})
	list, err := r.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{})
	if err != nil || len(list.GetMachines()) != 1 {
		t.Fatalf("after a restart: %v, %v; want the one machine", list, err)
	}
	if got := list.GetMachines()[0].GetSpec().GetPlacement(); !proto.Equal(got, want) {
		t.Fatalf("after a restart spec.placement = %v, want %v", got, want)
	}
}
