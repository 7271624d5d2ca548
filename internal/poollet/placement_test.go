package poollet_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// The runtime receives a Machine's placement rules (its tolerations, and native_only for
// emulation Forbidden) in spec.placement, for a broker to pass on. A runtime machine made
// without them (before the field existed, or before the user added tolerations) is left
// alone: a placement that differs is nothing to carry out on a machine already placed.
func TestRuntimeReceivesThePlacement(t *testing.T) {
	startControllers(t)
	ctx := context.Background()
	p := newPool(t, "placement", func(c *fake.Config) { c.NativeArchitectures = c.Architectures })
	tolerations := []corev1.Toleration{
		{Key: "anvil.dev/site", Operator: corev1.TolerationOpEqual, Value: "s1", Effect: corev1.TaintEffectNoSchedule},
		{Key: "maintenance", Operator: corev1.TolerationOpExists},
	}
	m := newMachine(t, "placement", "placed", func(m *computev1alpha1.Machine) {
		m.Spec.Tolerations, m.Spec.Emulation = tolerations, computev1alpha1.EmulationForbidden
	})
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	want := &mriv1alpha1.Placement{NativeOnly: true, Tolerations: []*mriv1alpha1.Toleration{
		{Key: "anvil.dev/site", Operator: "Equal", Value: "s1", Effect: "NoSchedule"}, {Key: "maintenance", Operator: "Exists"}}}
	if rms := p.runtimeMachines(m); len(rms) != 1 || !proto.Equal(rms[0].GetSpec().GetPlacement(), want) {
		t.Fatalf("runtime machines %v; want one with spec.placement %v", rms, want)
	}

	plain := newMachine(t, "placement", "plain", nil)
	plain = waitFor(t, plain, "ran", inState(computev1alpha1.MachineStateRunning))
	rms := p.runtimeMachines(plain)
	if len(rms) != 1 || rms[0].GetSpec().GetPlacement() != nil {
		t.Fatalf("runtime machines %v; want one without spec.placement (nothing to say)", rms)
	}
	before := rms[0]
	patch := client.MergeFrom(plain.DeepCopy())
	plain.Spec.Tolerations = tolerations
	if err := env.Client.Patch(ctx, plain, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, plain, "observed its new tolerations", inState(computev1alpha1.MachineStateRunning))
	after := p.runtimeMachines(plain)
	if len(after) != 1 || after[0].GetMetadata().GetId() != before.GetMetadata().GetId() ||
		after[0].GetMetadata().GetGeneration() != before.GetMetadata().GetGeneration() || after[0].GetSpec().GetPlacement() != nil {
		t.Fatalf("after a toleration was added the runtime holds %v; want the same machine untouched: %v", after, before)
	}
}
