package capi_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// Pivot on the fake pool: `clusterctl move` of a Cluster from management
// cluster A (the rig: anvil with the pools, and Cluster API) to B (a second control plane with
// Cluster API and anvil's provider, no pools). B reaches A only through the AnvilCluster's
// identityRef, a kubeconfig for one tenant namespace of A. The anvil Machines stay in A, the
// same objects; scaling the MachineDeployment in B makes a new one there; the identity cannot
// read A's BMC credentials.
//
// The AnvilCluster names the identity from the start, in A too: the anvil Machines are made in
// the tenant namespace through it, so the move changes only which management cluster holds the
// kubeconfig, never where the machines are or what their providerIDs say. (A cluster started
// without identityRef has its machines in the Cluster's own namespace of A, which the move
// empties; identityRef cannot be added later.)
func TestPivotKeepsMachinesWhereTheyAre(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	tenant := capienv.Namespace(t, env.Client, "pivot-tenant") // in A: the anvil Machines
	ns := capienv.Namespace(t, env.Client, "pivot")            // in A, then in B: the Cluster API objects
	identity := capienv.TenantIdentity(t, env.Config, tenant)
	startTenantStandIns(t, r, tenant)
	b := capienv.StartManagementCluster(t, capienv.Options{})
	// B's admin allows the moved AnvilCluster's namespace the identity's (clusterctl moves no grant).
	if err := b.Client.Create(ctx, capienv.IdentityGrant(ns, tenant)); err != nil {
		t.Fatal(err)
	}
	if err := capienv.InstallInventory(ctx, env.Client, "capi-system"); err != nil {
		t.Fatal(err)
	}

	const name = "pivot"
	cluster := newClusterWithIdentity(t, r, ns, name, identity, tenant)
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	md := newMachineDeployment(t, cluster, "md", machineSpec(r, computev1alpha1.ArchitectureAMD64), "", 1)
	capienv.ClusterHealthy(t, env.Client, ns, name, 2, tenant, 3*time.Minute)
	providerIDs := capienv.AwaitMoveReady(t, env.Client, ns, name)
	before := capienv.AnvilMachines(t, env.Client, tenant)
	if len(before) != 2 {
		t.Fatalf("anvil Machines in %s before the move: %v, want the control plane's and the worker's", tenant, before)
	}

	deleted := capienv.WatchDeletions(t, env.Config, tenant)
	capienv.ClusterctlMove(t, r.capi.Kubeconfig(), b.Kubeconfig, ns)

	// A: the Cluster API objects are gone, the anvil Machines are the same objects.
	capienv.AssertMovedAway(t, env.Client, ns, tenant, before)

	// B: the moved objects reconcile through the identity; the Machines are healthy again.
	capienv.AwaitAnvilClusterReady(t, b.Client, ns, name)
	capienv.ClusterHealthy(t, b.Client, ns, name, 2, tenant, 3*time.Minute)
	capienv.AssertProviderIDs(t, b.Client, ns, providerIDs)

	// Scaling in B makes a new anvil Machine in A's tenant namespace; the old ones stay.
	if err := capienv.Scale(ctx, b.Client, md, 2); err != nil {
		t.Fatalf("in B: %v", err)
	}
	capienv.ClusterHealthy(t, b.Client, ns, name, 3, tenant, 3*time.Minute)
	capienv.AssertScaledInA(t, env.Client, tenant, before, 3)

	if d := deleted(); len(d) != 0 {
		t.Errorf("anvil Machines of %s deleted or marked for deletion through the move and the scaling: %v", tenant, d)
	}

	// The identity reaches its tenant namespace only: never A's BMC credentials.
	capienv.AssertNoBMCCredentials(t, env.Config, identity, tenant)
}

// startTenantStandIns registers a stand-in Node (see standIns) for every running anvil
// Machine of A's namespace tenant, from the providerID in its first-boot metadata, as the
// guest's agent would: whichever management cluster holds its AnvilMachine.
func startTenantStandIns(t testing.TB, r *rig, tenant string) {
	s := &standIns{t: t, r: r, ns: tenant, unhealthy: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	sync := func() error {
		list := &computev1alpha1.MachineList{}
		if err := env.Client.List(ctx, list, client.InNamespace(tenant)); err != nil {
			return err
		}
		for _, m := range list.Items {
			id := m.Spec.MetaData[infrav1.MetaDataProviderID]
			if id == "" || m.Status.State != computev1alpha1.MachineStateRunning {
				continue
			}
			if err := s.ensureNode(ctx, tenant+"-"+m.Name, id, string(m.Status.Architecture)); err != nil {
				return err
			}
		}
		return nil
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := sync(); err != nil && ctx.Err() == nil {
				t.Logf("stand-in Nodes: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}
