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
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/test/capienv"
)

// A new image in a MachineDeployment's template replaces its Machines while Cluster API's
// InPlaceUpdates gate is off, and, with it on and anvil's extension registered, reimages
// them in place: the same Machine, the same anvil Machine, now booting the new image.
func TestImageChangeInPlaceOrByReplacement(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	image2, err := pushTestOS(ctx, "2")
	if err != nil {
		t.Fatal(err)
	}
	ns := capienv.Namespace(t, env.Client, "inplace")
	startStandIns(t, r, ns)
	cluster := newCluster(t, r, ns, "ip")
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)

	// The gate off: replaced.
	off := newMachineDeployment(t, cluster, "off", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	before := waitReplicas(t, off, 1, computev1alpha1.ArchitectureAMD64, "zone-a")[0]
	capienv.RollInPlaceFirst(t, env.Client, off)
	capienv.RollTo(t, env.Client, off, image2)
	capienv.Eventually(t, 3*time.Minute, "the gate off: a new Machine on the new image", func() error {
		return oneMachineOn(ctx, off, image2, func(m *clusterv1.Machine) error {
			if m.UID == before.UID {
				return fmt.Errorf("still the old Machine %s", m.Name)
			}
			return nil
		})
	})

	// The gate on, the extension registered: updated in place.
	r.restartCAPI(t, clusterapi.InPlaceGates())
	capienv.RegisterExtension(t, env.Config, r.extension)
	on := newMachineDeployment(t, cluster, "on", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	capienv.RollInPlaceFirst(t, env.Client, on)
	before = waitReplicas(t, on, 1, computev1alpha1.ArchitectureAMD64, "zone-a")[0]
	anvilBefore := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: before.Spec.InfrastructureRef.Name}, anvilBefore); err != nil {
		t.Fatal(err)
	}
	capienv.StandInBootstrapProvider(t, env.Client, &before)
	capienv.RollTo(t, env.Client, on, image2)
	capienv.Eventually(t, 3*time.Minute, "the gate on: the same Machine reimaged to the new image", func() error {
		return oneMachineOn(ctx, on, image2, func(m *clusterv1.Machine) error {
			if m.UID != before.UID {
				return fmt.Errorf("replaced: %s → %s", before.Name, m.Name)
			}
			if c := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Machine UpToDate %+v", c)
			}
			anvil := &computev1alpha1.Machine{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, anvil); err != nil {
				return err
			}
			if anvil.UID != anvilBefore.UID {
				return fmt.Errorf("the anvil Machine was replaced")
			}
			return nil
		})
	})
}

// oneMachineOn says why md does not have exactly one healthy Machine whose anvil Machine
// runs image (its spec and its booted digest, the index's), checked further by also.
func oneMachineOn(ctx context.Context, md *clusterv1.MachineDeployment, image string, also func(*clusterv1.Machine) error) error {
	machines, err := capienv.MachinesOf(ctx, env.Client, md)
	if err != nil {
		return err
	}
	if len(machines) != 1 {
		return fmt.Errorf("%d Machines", len(machines))
	}
	m := &machines[0]
	anvil := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, anvil); err != nil {
		return err
	}
	if err := capienv.Healthy(m); err != nil {
		am := &infrav1.AnvilMachine{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(anvil), am)
		return fmt.Errorf("%w (Updating %+v; AnvilMachine image %s annotations %v; anvil Machine image %s booted %+v conditions %+v)", err,
			apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpdatingCondition), am.Spec.Image, am.Annotations,
			anvil.Spec.Image, anvil.Status.Image, anvil.Status.Conditions)
	}
	if anvil.Spec.Image != image || anvil.Status.Image == nil || anvil.Status.Image.Reference != image {
		return fmt.Errorf("anvil Machine %s: spec image %s, booted %+v; want %s", anvil.Name, anvil.Spec.Image, anvil.Status.Image, image)
	}
	return also(m)
}

// restartCAPI runs Cluster API's manager again with gates, and with its defaults again when
// the test ends (the rest of the package runs without them).
func (r *rig) restartCAPI(t testing.TB, gates map[string]bool) {
	t.Helper()
	start := func(gates map[string]bool) {
		if err := r.capi.Stop(); err != nil {
			t.Fatalf("stopping Cluster API's manager: %v", err)
		}
		c, err := capienv.Start(context.Background(), env.Config, r.capiOptions(gates))
		if err != nil {
			t.Fatalf("starting Cluster API's manager with %v: %v", gates, err)
		}
		r.capi = c
	}
	start(gates)
	t.Cleanup(func() { start(nil) })
}
