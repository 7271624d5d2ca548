package capi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
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
	rollInPlaceFirst(t, off)
	rollTo(t, off, image2)
	capienv.Eventually(t, 3*time.Minute, "the gate off: a new Machine on the new image", func() error {
		return oneMachineOn(ctx, off, image2, func(m *clusterv1.Machine) error {
			if m.UID == before.UID {
				return fmt.Errorf("still the old Machine %s", m.Name)
			}
			return nil
		})
	})

	// The gate on, the extension registered: updated in place.
	r.restartCAPI(t, map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true})
	registerExtension(t, r)
	on := newMachineDeployment(t, cluster, "on", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	rollInPlaceFirst(t, on)
	before = waitReplicas(t, on, 1, computev1alpha1.ArchitectureAMD64, "zone-a")[0]
	anvilBefore := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: before.Spec.InfrastructureRef.Name}, anvilBefore); err != nil {
		t.Fatal(err)
	}
	standInBootstrapProvider(t, &before)
	rollTo(t, on, image2)
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

// standInBootstrapProvider records on a Machine what a bootstrap provider's data gives it:
// status.initialization.bootstrapDataSecretCreated. Cluster API v1.14 sets it only for a
// Machine with a bootstrap config (spec.bootstrap.configRef), never for one naming its data
// Secret directly, as these tests' Machines do (they have no bootstrap provider); and its
// Machine controller calls UpdateMachine only once it is set.
func standInBootstrapProvider(t testing.TB, m *clusterv1.Machine) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Status.Initialization.BootstrapDataSecretCreated = new(true)
	if err := env.Client.Status().Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// rollInPlaceFirst sets md's rollout to take a Machine down before making another (maxSurge
// 0, maxUnavailable 1): with the default (maxUnavailable 0) Cluster API makes a new Machine
// first and updates in place only once there is room, which for one replica never comes.
func rollInPlaceFirst(t testing.TB, md *clusterv1.MachineDeployment) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	cur.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &zero, MaxUnavailable: &one}}
	if err := env.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// rollTo points md at a new AnvilMachineTemplate, its current one with image.
func rollTo(t testing.TB, md *clusterv1.MachineDeployment, image string) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		t.Fatal(err)
	}
	old := &infrav1.AnvilMachineTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: cur.Spec.Template.Spec.InfrastructureRef.Name}, old); err != nil {
		t.Fatal(err)
	}
	next := &infrav1.AnvilMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: old.Name + "-next", Namespace: md.Namespace}, Spec: *old.Spec.DeepCopy()}
	next.Spec.Template.Spec.Image = image
	if err := env.Client.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.Template.Spec.InfrastructureRef.Name = next.Name
	if err := env.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
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
		c, err := capienv.Start(context.Background(), env.Config, capienv.Options{FeatureGates: gates, Args: r.capiArgs})
		if err != nil {
			t.Fatalf("starting Cluster API's manager with %v: %v", gates, err)
		}
		r.capi = c
	}
	start(gates)
	t.Cleanup(func() { start(nil) })
}

// registerExtension registers anvil's in-place update extension with Cluster API and waits
// for Cluster API to discover its handlers; the registration goes when the test ends.
func registerExtension(t testing.TB, r *rig) {
	t.Helper()
	ctx := context.Background()
	caBundle, err := os.ReadFile(filepath.Join(r.extension.CertDir, extension.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := extension.ExtensionConfig("anvil", r.extension.BindAddress, caBundle)
	if err != nil {
		t.Fatal(err)
	}
	c, err := capienv.Client(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatalf("registering the extension: %v", err)
	}
	// Before the manager restarts without RuntimeSDK, whose webhook then refuses them.
	t.Cleanup(func() { _ = c.Delete(context.Background(), ec) })
	capienv.Eventually(t, time.Minute, "Cluster API to discover the extension", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Discovered %+v", cond)
		}
		return nil
	})
}
