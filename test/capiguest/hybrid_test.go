package capiguest_test

import (
	"context"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// One Cluster on VMs of two architectures, driven by the real Cluster API manager: a
// control-plane Machine and a MachineDeployment per architecture, each Machine an anvil
// Machine on a QEMU pool whose guest runs the Cluster's bootstrap script and registers its
// own Node through its network's forward to the workload apiserver. Every Machine reaches
// Running with a nodeRef and NodeHealthy from that Node; scaling a MachineDeployment up adds
// a VM that joins, scaling it down deletes the Machine's anvil Machine, its VM and its Node.
func TestHybridClusterOnVMs(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	ctx := context.Background()
	start := time.Now()
	amd, amdTmpl := capienv.MachineDeployment(c.Cluster, "amd64", bootstrapSecret, "", r.machineSpec(computev1alpha1.ArchitectureAMD64), 1)
	arm, armTmpl := capienv.MachineDeployment(c.Cluster, "arm64", bootstrapSecret, "", r.machineSpec(computev1alpha1.ArchitectureARM64), 1)
	if err := capienv.Create(ctx, env.Client, amdTmpl, amd, armTmpl, arm); err != nil {
		t.Fatal(err)
	}

	cp := &clusterv1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.controlPlane}, cp); err != nil {
		t.Fatal(err)
	}
	assertGuestNode(t, r, cp, computev1alpha1.ArchitectureAMD64)

	for _, d := range []struct {
		md   *clusterv1.MachineDeployment
		arch computev1alpha1.Architecture
	}{{amd, computev1alpha1.ArchitectureAMD64}, {arm, computev1alpha1.ArchitectureARM64}} {
		for _, m := range waitHealthy(t, d.md, 1) {
			assertGuestNode(t, r, &m, d.arch)
		}
	}

	// Up: a second amd64 VM joins. Down: one of the two goes, VM, Node and all.
	if err := capienv.Scale(ctx, env.Client, amd, 2); err != nil {
		t.Fatal(err)
	}
	guests := map[string]guestVM{}
	for _, m := range waitHealthy(t, amd, 2) {
		guests[m.Name] = assertGuestNode(t, r, &m, computev1alpha1.ArchitectureAMD64)
	}
	if err := capienv.Scale(ctx, env.Client, amd, 1); err != nil {
		t.Fatal(err)
	}
	kept := waitHealthy(t, amd, 1)
	delete(guests, kept[0].Name)
	if len(guests) != 1 {
		t.Fatalf("after the scale-down, Machine %s is kept: not one of the two before", kept[0].Name)
	}
	for _, g := range guests {
		awaitGone(t, r, g)
	}
	t.Logf("the whole test took %s", time.Since(start).Round(100*time.Millisecond))
}
