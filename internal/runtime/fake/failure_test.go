package fake

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

func newRuntime(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	cfg.Allocatable = &mriv1alpha1.Resources{MilliCpu: 8000, MemoryBytes: 8 << 30}
	cfg.Architectures = []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func machineWithUID(uid string) *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid}}, Spec: spec()}
}

func TestExplicitFailuresAreUnavailable(t *testing.T) {
	r := newRuntime(t, Config{FailureRate: 1})
	_, err := r.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: machineWithUID("u1")})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("create with failure rate 1: %v, want UNAVAILABLE", err)
	}
	list, _ := r.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{})
	if len(list.Machines) != 0 {
		t.Fatalf("a failed create left %d machines", len(list.Machines))
	}
}

func TestSilentCreateFailureKeepsNothing(t *testing.T) {
	r := newRuntime(t, Config{SilentFailureRate: 1})
	resp, err := r.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: machineWithUID("u1")})
	if err != nil || resp.Machine.GetMetadata().GetId() == "" {
		t.Fatalf("a silent failure must look like success: %v %v", resp, err)
	}
	list, _ := r.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{})
	if len(list.Machines) != 0 {
		t.Fatalf("a silently failed create kept %d machines", len(list.Machines))
	}
}

// A step lost to a silent failure is carried out when the caller repeats the call.
func TestLostStepCompletesOnRepeat(t *testing.T) {
	r := newRuntime(t, Config{})
	resp, err := r.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: machineWithUID("u1")})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Machine.Metadata.Id
	r.cfg.SilentFailureRate = 1
	if _, err := r.UpdateMachinePower(context.Background(), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	m := r.machines[id]
	if !unsettled(m) || m.Status.State != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING {
		t.Fatalf("the lost step took effect: %v", m.Status)
	}
	r.cfg.SilentFailureRate = 0
	if _, err := r.UpdateMachinePower(context.Background(), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	if m := r.machines[id]; unsettled(m) || m.Status.State != mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN {
		t.Fatalf("repeating the call did not complete the step: %v", m.Status)
	}
}
