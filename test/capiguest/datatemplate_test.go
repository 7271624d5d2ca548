package capiguest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/testos"
)

// One AnvilDataTemplate serves a MachineDeployment of two VMs: each guest boots with its own
// hostname ({cluster}-w-{index}) and index (the anvil-index key), as its console shows, and
// registers its Node under that hostname.
func TestDataTemplateHostnamesOnConsoles(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	ctx := context.Background()
	tmpl := &infrav1.AnvilDataTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: c.Namespace},
		Spec: infrav1.AnvilDataTemplateSpec{Hostname: "{cluster}-w-{index}", MetaData: []infrav1.MetaDataEntry{
			{Key: "anvil-index", Index: &infrav1.IndexSource{}},
		}}}
	spec := r.machineSpec(computev1alpha1.ArchitectureAMD64)
	spec.DataTemplateRef = &infrav1.DataTemplateReference{Name: tmpl.Name}
	md, mdTmpl := capienv.MachineDeployment(c.Cluster, "templated", bootstrapSecret, "", spec, 2)
	if err := capienv.Create(ctx, env.Client, tmpl, mdTmpl, md); err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, m := range waitHealthy(t, md, 2) {
		g := assertGuestNode(t, r, &m, computev1alpha1.ArchitectureAMD64)
		host, index := g.anvil.Spec.Hostname, g.anvil.Spec.MetaData["anvil-index"]
		got = append(got, host+" "+index)
		for _, line := range []string{
			testos.MetaLine("anvil-index", index),
			testos.MetaLine(infrav1.MetaDataProviderID, m.Spec.ProviderID),
			testos.ReadyLine(computev1alpha1.ArchitectureAMD64, host, "none"),
		} {
			if !strings.Contains(g.console, line) {
				t.Errorf("the console of %s (Machine %s) has no %q:\n%s", g.anvil.Name, m.Name, line, g.console)
			}
		}
	}
	slices.Sort(got)
	if want := []string{clusterName + "-w-0 0", clusterName + "-w-1 1"}; !slices.Equal(got, want) {
		t.Errorf("hostname and index of the two machines: %q, want %q", got, want)
	}
}
