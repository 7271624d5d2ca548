package capi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// One data template serves a whole MachineDeployment: each machine gets its own index,
// hostname and address, and a machine made after a scale-down reuses the freed index.
func TestDataTemplateGivesEachMachineItsOwn(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "datatemplate")
	startStandIns(t, r, ns)
	cluster := newCluster(t, r, ns, "dt")
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	tmpl := &infrav1.AnvilDataTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: infrav1.AnvilDataTemplateSpec{Hostname: "{cluster}-worker-{index}", MetaData: []infrav1.MetaDataEntry{
			{Key: "anvil-index", Index: &infrav1.IndexSource{}},
			{Key: "ip", Addresses: []string{"10.0.0.10", "10.0.0.11", "10.0.0.12"}},
			// A reference the runtime placing the machine resolves into its first boot.
			{Key: "mac", Hardware: &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}},
		}}}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	spec := machineSpec(r, computev1alpha1.ArchitectureAMD64)
	spec.DataTemplateRef = &infrav1.DataTemplateReference{Name: tmpl.Name}
	md := newMachineDeployment(t, cluster, "workers", spec, "zone-a", 2)
	waitReplicas(t, md, 2, computev1alpha1.ArchitectureAMD64, "zone-a")
	if got := renderedOf(t, ns, md); !slices.Equal(got, []string{"dt-worker-0 0 10.0.0.10", "dt-worker-1 1 10.0.0.11"}) {
		t.Fatalf("hostname, index and address of each machine: %v", got)
	}

	// Scale down by one: the freed index is the one given next.
	scale(t, md, 1)
	machines := waitReplicas(t, md, 1, computev1alpha1.ArchitectureAMD64, "zone-a")
	kept := renderedOf(t, ns, md)
	scale(t, md, 2)
	waitReplicas(t, md, 2, computev1alpha1.ArchitectureAMD64, "zone-a")
	if got := renderedOf(t, ns, md); !slices.Equal(got, []string{"dt-worker-0 0 10.0.0.10", "dt-worker-1 1 10.0.0.11"}) || !slices.Contains(got, kept[0]) {
		t.Fatalf("after a scale-down of %s and up: %v (kept %v)", machines[0].Name, got, kept)
	}
	capienv.Eventually(t, time.Minute, "the template's status to hold the two machines' indexes", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return err
		}
		if len(tmpl.Status.Indexes) != 2 {
			return fmt.Errorf("indexes %v", tmpl.Status.Indexes)
		}
		return nil
	})
}

// renderedOf is "hostname index ip" of each anvil Machine of md's Machines, sorted, and checks
// each carries its providerID in its metadata and the template's hardware reference.
func renderedOf(t *testing.T, ns string, md interface{ GetName() string }) []string {
	t.Helper()
	ctx := context.Background()
	list := &infrav1.AnvilMachineList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, am := range list.Items {
		if am.Spec.DataTemplateRef == nil || am.DeletionTimestamp != nil {
			continue
		}
		m := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&am), m); err != nil {
			t.Fatal(err)
		}
		if got := m.Spec.MetaData[infrav1.MetaDataProviderID]; got != am.Spec.ProviderID {
			t.Errorf("anvil Machine %s has provider-id %q, its AnvilMachine %q", m.Name, got, am.Spec.ProviderID)
		}
		if want := []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}; !slices.Equal(m.Spec.HardwareMetaData, want) {
			t.Errorf("anvil Machine %s has hardwareMetaData %v, want the template's reference %v", m.Name, m.Spec.HardwareMetaData, want)
		}
		out = append(out, fmt.Sprintf("%s %s %s", m.Spec.Hostname, m.Spec.MetaData["anvil-index"], m.Spec.MetaData["ip"]))
	}
	slices.Sort(out)
	return out
}
