package capiguest_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// Pivot on real guests: `clusterctl move` of a Cluster of VMs from
// management cluster A (the rig: anvil with the QEMU pools, and Cluster API) to B (a second
// control plane with Cluster API and anvil's provider, no pools), B reaching A only through
// the AnvilCluster's identityRef, a ServiceAccount kubeconfig for one tenant namespace of A
// (capienv.TenantIdentity). The guests keep running through the move, their anvil Machines
// the same objects in A; in B the Machines are healthy again from the same Nodes; scaling
// the MachineDeployment in B makes a new anvil Machine in A whose guest boots and registers
// its own Node; the identity gets 403 on A's BMC credentials. As in test/capi's
// TestPivotKeepsMachinesWhereTheyAre, the AnvilCluster names the identity from the start.
func TestPivotOfGuests(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	start := time.Now()
	amd64 := computev1alpha1.ArchitectureAMD64
	tenant := capienv.Namespace(t, env.Client, "pivot-tenant") // in A: the anvil Machines
	ns := capienv.Namespace(t, env.Client, "pivot")            // in A, then in B: the Cluster API objects
	identity := capienv.TenantIdentity(t, env.Config, tenant)
	// Runs once B has stopped (cleanups run last first): nothing owns the guests any more.
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &computev1alpha1.Machine{}, client.InNamespace(tenant))
	})
	// B's Cluster API resyncs as the rig's does (see capiSyncPeriod): its Machines are
	// matched to their Nodes anew.
	b := capienv.StartManagementCluster(t, capienv.Options{Args: []string{"--sync-period", capiSyncPeriod.String()}})
	// B's admin allows the moved AnvilCluster's namespace the identity's (clusterctl moves no grant).
	if err := b.Client.Create(ctx, capienv.IdentityGrant(ns, tenant)); err != nil {
		t.Fatal(err)
	}
	if err := capienv.InstallInventory(ctx, env.Client, "capi-system"); err != nil {
		t.Fatal(err)
	}

	// A Cluster of its own (the shared one has no identity): a control-plane Machine and a
	// MachineDeployment of one, amd64 VMs booting the agent's script; its bootstrap Secret
	// carries the move label (no bootstrap provider owns it).
	const name = "pivot"
	endpoint, err := capienv.Endpoint(r.workload.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cluster, objs := capienv.Cluster(ns, name, r.kubeconfig, endpoint)
	objs = capienv.WithIdentity(cluster, objs, identity, tenant)
	boot := capienv.BootstrapSecret(cluster, bootstrapSecret, r.bootstrapScript(t))
	boot.Labels[infrav1.LabelMove] = ""
	objs = append(objs, boot)
	objs = append(objs, capienv.ControlPlaneMachine(cluster, "pivot-cp", bootstrapSecret, r.machineSpec(amd64))...)
	md, tmpl := capienv.MachineDeployment(cluster, "pivot-md", bootstrapSecret, "", r.machineSpec(amd64), 1)
	if err := capienv.Create(ctx, env.Client, append(objs, tmpl, md)...); err != nil {
		t.Fatal(err)
	}
	guests := map[string]guestVM{}
	for _, m := range capienv.ClusterHealthy(t, env.Client, ns, name, 2, tenant, bootTimeout) {
		g := assertGuestNode(t, r, &m, amd64)
		if g.anvil.Namespace != tenant {
			t.Fatalf("anvil Machine of %s is in %s, not the identity's namespace %s", m.Name, g.anvil.Namespace, tenant)
		}
		guests[m.Name] = g
	}
	providerIDs := capienv.AwaitMoveReady(t, env.Client, ns, name)
	before := capienv.AnvilMachines(t, env.Client, tenant)
	if len(before) != 2 {
		t.Fatalf("anvil Machines in %s before the move: %v, want the control plane's and the worker's", tenant, before)
	}
	t.Logf("Cluster healthy in A, ready to move, %s after the start", time.Since(start).Round(100*time.Millisecond))

	deleted := capienv.WatchDeletions(t, env.Config, tenant)
	capienv.ClusterctlMove(t, r.capi.Kubeconfig(), b.Kubeconfig, ns)

	// A: the Cluster API objects are gone, the anvil Machines are the same objects.
	capienv.AssertMovedAway(t, env.Client, ns, tenant, before)

	// B: the moved objects reconcile through the identity; the Machines are healthy again,
	// from the same guests' Nodes.
	moved := time.Now()
	capienv.AwaitAnvilClusterReady(t, b.Client, ns, name)
	for _, m := range capienv.ClusterHealthy(t, b.Client, ns, name, 2, tenant, bootTimeout) {
		g, ok := guests[m.Name]
		if !ok {
			t.Fatalf("Machine %s in B was not in A", m.Name)
		}
		if h := assertGuestNode(t, r, &m, amd64); h.anvil.UID != g.anvil.UID || h.node.UID != g.node.UID {
			t.Errorf("Machine %s in B: anvil Machine %s, Node %s; in A %s, %s", m.Name, h.anvil.UID, h.node.UID, g.anvil.UID, g.node.UID)
		}
	}
	capienv.AssertProviderIDs(t, b.Client, ns, providerIDs)
	t.Logf("healthy in B %s after the move", time.Since(moved).Round(100*time.Millisecond))

	// Scaling in B makes a new anvil Machine in A's tenant namespace, whose guest joins; the
	// old ones stay.
	scaled := time.Now()
	if err := capienv.Scale(ctx, b.Client, md, 2); err != nil {
		t.Fatalf("in B: %v", err)
	}
	for _, m := range capienv.ClusterHealthy(t, b.Client, ns, name, 3, tenant, bootTimeout) {
		if _, ok := guests[m.Name]; !ok {
			assertGuestNode(t, r, &m, amd64)
		}
	}
	capienv.AssertScaledInA(t, env.Client, tenant, before, 3)

	t.Logf("the new Machine made in B healthy on its guest %s after the scaling", time.Since(scaled).Round(100*time.Millisecond))
	if d := deleted(); len(d) != 0 {
		t.Errorf("anvil Machines of %s deleted or marked for deletion through the move and the scaling: %v", tenant, d)
	}

	// The identity reaches its tenant namespace only: never A's BMC credentials.
	capienv.AssertNoBMCCredentials(t, env.Config, identity, tenant)
	t.Logf("the whole test took %s", time.Since(start).Round(100*time.Millisecond))
}
