package capienv

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
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
)

// RegisterExtension registers anvil's in-place update extension, served as ext says (by
// RunAnvilManager), with the Cluster API manager of the apiserver of cfg (started with
// clusterapi.InPlaceGates) and waits for Cluster API to discover its handlers; the
// registration goes when the test ends, before a manager restarted without RuntimeSDK would
// refuse its deletion.
func RegisterExtension(t testing.TB, cfg *rest.Config, ext extension.Options) {
	t.Helper()
	ctx := context.Background()
	caBundle, err := os.ReadFile(filepath.Join(ext.CertDir, extension.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := extension.ExtensionConfig("anvil", ext.BindAddress, caBundle)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatalf("registering the extension: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ec) })
	Eventually(t, time.Minute, "Cluster API to discover the extension", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Discovered %+v", cond)
		}
		return nil
	})
}

// StandInBootstrapProvider records on a Machine what a bootstrap provider's data gives it:
// status.initialization.bootstrapDataSecretCreated. Cluster API v1.14 sets it only for a
// Machine with a bootstrap config (spec.bootstrap.configRef), never for one naming its data
// Secret directly, as the tests' Machines do (they have no bootstrap provider); and its
// Machine controller calls UpdateMachine only once it is set.
func StandInBootstrapProvider(t testing.TB, c client.Client, m *clusterv1.Machine) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Status.Initialization.BootstrapDataSecretCreated = new(true)
	if err := c.Status().Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// RollInPlaceFirst sets md's rollout to take a Machine down before making another (maxSurge
// 0, maxUnavailable 1): with the default (maxUnavailable 0) Cluster API makes a new Machine
// first and updates in place only once there is room, which for one replica never comes.
func RollInPlaceFirst(t testing.TB, c client.Client, md *clusterv1.MachineDeployment) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	cur.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &zero, MaxUnavailable: &one}}
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// RollTo points md at a new AnvilMachineTemplate, <its current one>-next with image.
func RollTo(t testing.TB, c client.Client, md *clusterv1.MachineDeployment, image string) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		t.Fatal(err)
	}
	old := &infrav1.AnvilMachineTemplate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: cur.Spec.Template.Spec.InfrastructureRef.Name}, old); err != nil {
		t.Fatal(err)
	}
	next := &infrav1.AnvilMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: old.Name + "-next", Namespace: md.Namespace}, Spec: *old.Spec.DeepCopy()}
	next.Spec.Template.Spec.Image = image
	if err := c.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.Template.Spec.InfrastructureRef.Name = next.Name
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}
