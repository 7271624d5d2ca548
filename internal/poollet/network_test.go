package poollet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// The attacks: a tenant puts a NIC on the builders' network (to reach the registry's forward
// builders push through), by an ephemeral template or a NetworkInterface of its own, or on
// the outbound network the pool opened to another tenant. Bound by hand, so that only the
// poollet stands in the way. Each is handed back Scheduled=False naming the network and what
// to fix, and the runtime never holds a machine for it; the allowed tenant's Machine and a
// builder run.
func TestTenantNICsJoinOnlyTheirNetworks(t *testing.T) {
	ctx := context.Background()
	startControllers(t)
	p := newPool(t, "netguard", func(c *fake.Config) {
		c.Networks = []*mriv1alpha1.PoolNetwork{
			{Name: "anvil-builders", Forwards: []*mriv1alpha1.NetworkForward{{Guest: "10.0.2.100:5000", Target: "127.0.0.1:5000"}}},
			{Name: "egress-a", Nat: true},
		}
	})
	mp := &computev1alpha1.MachinePool{}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: p.name}, mp)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("the poollet did not create pool %s: %v", p.name, err)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Networks = []computev1alpha1.NetworkAccess{
		{Name: "anvil-builders", Builders: true},
		{Name: "egress-a", Tenants: &computev1alpha1.TenantPolicy{Namespaces: []string{"net-team-a"}}},
	}
	if err := env.Client.Patch(ctx, mp, patch); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"net-team-a", "net-team-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	onNetwork := func(ns, network string, labels map[string]string) func(*computev1alpha1.Machine) {
		return func(m *computev1alpha1.Machine) {
			m.Namespace, m.Labels = ns, labels
			m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: p.name}
			m.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "eth0",
				Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{
					Spec: computev1alpha1.NetworkInterfaceSpec{Network: network}}}}}
		}
	}
	refused := func(t *testing.T, m *computev1alpha1.Machine, network, why string) {
		t.Helper()
		waitFor(t, m, "refused for network "+network, func(m *computev1alpha1.Machine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonRuntimeRefused &&
				strings.Contains(c.Message, `network "`+network+`"`) && strings.Contains(c.Message, why) && strings.Contains(c.Message, "spec.networks")
		})
		if n := len(p.runtimeMachines(m)); n != 0 {
			t.Fatalf("the runtime holds %d machines of Machine %s/%s on network %s", n, m.Namespace, m.Name, network)
		}
		t.Logf("refused: %s/%s on %s", m.Namespace, m.Name, network)
	}

	refused(t, newMachine(t, "netguard", "tenant-on-builders", onNetwork("net-team-b", "anvil-builders", nil)), "anvil-builders", "reserved for OS image builders")
	// A label the builders carry but the image-builder marker missing: still a tenant.
	refused(t, newMachine(t, "netguard", "tenant-builder-lookalike", onNetwork("net-team-b", "anvil-builders",
		map[string]string{"images.anvil.dev/build": "b"})), "anvil-builders", "reserved for OS image builders")
	nic := &computev1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Namespace: "net-team-b", Name: "sneaky"},
		Spec: computev1alpha1.NetworkInterfaceSpec{Network: "anvil-builders"}}
	if err := env.Client.Create(ctx, nic); err != nil {
		t.Fatal(err)
	}
	refused(t, newMachine(t, "netguard", "tenant-nic-ref-on-builders", func(m *computev1alpha1.Machine) {
		onNetwork("net-team-b", "", nil)(m)
		m.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "eth0", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "sneaky"}}}
	}), "anvil-builders", "reserved for OS image builders")
	refused(t, newMachine(t, "netguard", "team-b-on-team-a-egress", onNetwork("net-team-b", "egress-a", nil)), "egress-a", "not open to this namespace")

	allowed := newMachine(t, "netguard", "team-a-on-its-egress", onNetwork("net-team-a", "egress-a", nil))
	waitFor(t, allowed, "ran on its tenant's network", inState(computev1alpha1.MachineStateRunning))
	builder := newMachine(t, "netguard", "builder", onNetwork("net-team-b", "anvil-builders", map[string]string{computev1alpha1.LabelImageBuilder: "true"}))
	waitFor(t, builder, "ran on the builders' network", inState(computev1alpha1.MachineStateRunning))
	isolated := newMachine(t, "netguard", "team-b-isolated", onNetwork("net-team-b", "nothing-here", nil))
	waitFor(t, isolated, "ran on a network that reaches nothing", inState(computev1alpha1.MachineStateRunning))
}
