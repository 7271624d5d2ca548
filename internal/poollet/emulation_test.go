package poollet_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// A pool says how it runs each architecture, and a Machine that forbids emulation runs only
// where its architecture is native: the scheduler keeps it off, and the poollet would not
// pick an emulated architecture for it if it were pinned there.
func TestEmulationForbiddenKeepsAMachineToNativeArchitectures(t *testing.T) {
	startControllers(t)
	newPool(t, "mixed", func(c *fake.Config) {
		c.Architectures = []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64}
		c.NativeArchitectures = []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64}
	})
	want := []computev1alpha1.ArchitectureExecution{
		{Architecture: "amd64", Execution: computev1alpha1.ExecutionNative},
		{Architecture: "arm64", Execution: computev1alpha1.ExecutionEmulated, Reason: "a fake pool claims no hardware for this architecture"},
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		mp := &computev1alpha1.MachinePool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "mixed"}, mp); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return reflect.DeepEqual(mp.Status.Execution, want), nil
	})
	if err != nil {
		t.Fatalf("pool status.execution never became %+v: %v", want, err)
	}

	forbid := func(arch computev1alpha1.Architecture) func(*computev1alpha1.Machine) {
		return func(m *computev1alpha1.Machine) {
			m.Spec.Architecture, m.Spec.Emulation = arch, computev1alpha1.EmulationForbidden
		}
	}
	native := newMachine(t, "mixed", "native", forbid("amd64"))
	waitFor(t, native, "ran natively", inState(computev1alpha1.MachineStateRunning))
	emulated := newMachine(t, "mixed", "emulated", forbid("arm64"))
	waitFor(t, emulated, "was kept off the emulating pool", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Reason == computev1alpha1.ReasonUnschedulable && strings.Contains(c.Message, "forbids emulation")
	})
	pinned := newMachine(t, "mixed", "pinned-emulated", func(m *computev1alpha1.Machine) {
		forbid("arm64")(m)
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "mixed"}
	})
	waitFor(t, pinned, "was refused by the poollet", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Reason == computev1alpha1.ReasonRuntimeRefused && m.Status.MachineID == ""
	})
	allowed := newMachine(t, "mixed", "allowed", func(m *computev1alpha1.Machine) { m.Spec.Architecture = "arm64" })
	if got := waitFor(t, allowed, "ran emulated", inState(computev1alpha1.MachineStateRunning)); got.Spec.Emulation != computev1alpha1.EmulationAllowed {
		t.Errorf("emulation defaulted to %q, want Allowed", got.Spec.Emulation)
	}
}

// A pool's networks, as its runtime reports them, are in its status: what a NIC on each
// reaches (its forwards, whether it has NAT) is declared in the API, not only on the
// runtime's command line.
func TestPoolStatusDeclaresNetworks(t *testing.T) {
	startControllers(t)
	newPool(t, "networks", func(c *fake.Config) {
		c.Networks = []*mriv1alpha1.PoolNetwork{{Name: "anvil-builders",
			Forwards: []*mriv1alpha1.NetworkForward{{Guest: "10.0.2.100:5000", Target: "127.0.0.1:5001"}}}, {Name: "internet", Nat: true},
			{Name: "nodes", Segment: "10.200.0.0/24"}}
	})
	want := []computev1alpha1.PoolNetwork{{Name: "anvil-builders",
		Forwards: []computev1alpha1.NetworkForward{{Guest: "10.0.2.100:5000", Target: "127.0.0.1:5001"}}}, {Name: "internet", NAT: true},
		{Name: "nodes", Segment: "10.200.0.0/24"}}
	var mp computev1alpha1.MachinePool
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "networks"}, &mp); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return reflect.DeepEqual(mp.Status.Networks, want), nil
	})
	if err != nil {
		t.Fatalf("pool status.networks = %+v, never %+v: %v", mp.Status.Networks, want, err)
	}
}
