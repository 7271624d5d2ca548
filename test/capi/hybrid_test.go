package capi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// One Cluster with a MachineDeployment per architecture, driven by the real Cluster API
// manager: every Machine reaches Running with a healthy Node on an anvil Machine of its
// architecture, in its failure domain; scaling each up and down makes and deletes anvil
// Machines.
func TestHybridMachineDeployments(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "hybrid")
	startStandIns(t, r, ns)
	cluster := newCluster(t, r, ns, "hybrid")
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	amd := newMachineDeployment(t, cluster, "amd64", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 2)
	arm := newMachineDeployment(t, cluster, "arm64", machineSpec(r, computev1alpha1.ArchitectureARM64), "zone-b", 2)

	ac := &infrav1.AnvilCluster{}
	capienv.Eventually(t, time.Minute, "AnvilCluster provisioned with the pools' zones", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), ac); err != nil {
			return err
		}
		var zones []string
		for _, fd := range ac.Status.FailureDomains {
			zones = append(zones, fd.Name)
		}
		if ac.Status.Initialization.Provisioned == nil || !*ac.Status.Initialization.Provisioned || fmt.Sprint(zones) != "[zone-a zone-b]" {
			return fmt.Errorf("provisioned %v, failure domains %v", ac.Status.Initialization.Provisioned, zones)
		}
		return nil
	})
	waitReplicas(t, amd, 2, computev1alpha1.ArchitectureAMD64, "zone-a")
	waitReplicas(t, arm, 2, computev1alpha1.ArchitectureARM64, "zone-b")
	capienv.Eventually(t, time.Minute, "Cluster with its control plane initialized", func() error {
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("ControlPlaneInitialized %+v", cond)
		}
		return nil
	})

	for _, step := range []struct {
		md       *clusterv1.MachineDeployment
		replicas int32
		arch     computev1alpha1.Architecture
		zone     string
	}{
		{amd, 3, computev1alpha1.ArchitectureAMD64, "zone-a"},
		{arm, 1, computev1alpha1.ArchitectureARM64, "zone-b"},
		{amd, 1, computev1alpha1.ArchitectureAMD64, "zone-a"},
		{arm, 3, computev1alpha1.ArchitectureARM64, "zone-b"},
	} {
		scale(t, step.md, step.replicas)
		waitReplicas(t, step.md, int(step.replicas), step.arch, step.zone)
	}
	// Every anvil Machine of the cluster belongs to a Machine that exists: scaling down
	// deleted the anvil Machines of the Machines it removed.
	capienv.Eventually(t, time.Minute, "anvil Machines of deleted Machines gone", func() error {
		anvils := &computev1alpha1.MachineList{}
		if err := env.Client.List(ctx, anvils, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
			return err
		}
		if len(anvils.Items) != 1+1+3 {
			var names []string
			for _, m := range anvils.Items {
				names = append(names, m.Name)
			}
			return fmt.Errorf("anvil Machines %v, want the control plane's and 1+3 workers'", names)
		}
		return nil
	})
}

// scale sets a MachineDeployment's replicas.
func scale(t testing.TB, md *clusterv1.MachineDeployment, replicas int32) {
	t.Helper()
	if err := capienv.Scale(context.Background(), env.Client, md, replicas); err != nil {
		t.Fatal(err)
	}
}
