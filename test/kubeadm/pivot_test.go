package kubeadm

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/kubedev"
)

// managementA is anvil dev as the cluster's first management cluster: its admin
// configuration, client and kubeconfig file.
type managementA struct {
	config     *rest.Config
	client     client.Client
	kubeconfig string
}

// nameIdentity makes what an infrastructure admin of anvil dev gives the cluster's owner
// before the cluster exists (docs/capi.md, Pivot): namespace tenant, a ServiceAccount
// kubeconfig allowed the provider's work there (capienv.TenantIdentity), the Secret
// <cluster>-identity holding it beside the Cluster (labelled as the cluster's, so the
// provider marks it for the move) and the AnvilClusterIdentity granting default that namespace.
func nameIdentity(t *testing.T, d *kubedev.Dev) managementA {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", d.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	a, err := capienv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(t, d.Kubeconfig, "", "create", "namespace", tenant); err != nil {
		t.Fatalf("creating namespace %s: %v\n%s", tenant, err, out)
	}
	identity := capienv.TenantIdentity(t, cfg, tenant)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: "default"}}
	if err := capienv.Create(context.Background(), a, capienv.WithIdentity(cluster, nil, identity, tenant)...); err != nil {
		t.Fatal(err)
	}
	return managementA{config: cfg, client: a, kubeconfig: d.Kubeconfig}
}

// pivotAndBack moves the running cluster's Cluster API objects with clusterctl from anvil
// dev (A) to a second management cluster B (its own control plane, Cluster API with the
// kubeadm providers, anvil's provider, no pools), which reaches the anvil Machines only
// through the identity, and then back. Through both moves the guests keep running: the
// anvil Machines in A are the same objects and none is deleted or marked for deletion, the
// workload cluster's Nodes keep their UIDs, and after each move the Machines are healthy
// again, with their providerIDs, and the Cluster Available, in the cluster that holds them.
func pivotAndBack(t *testing.T, a managementA, workload string) {
	t.Helper()
	ctx := context.Background()
	nodesBefore := nodeUIDs(t, workload)
	anvilBefore := capienv.AnvilMachines(t, a.client, tenant)
	providerIDs := capienv.AwaitMoveReady(t, a.client, "default", clusterName)
	deleted := capienv.WatchDeletions(t, a.config, tenant)

	b := capienv.StartManagementCluster(t, capienv.Options{Kubeadm: true, ControlPlaneArgs: dev.KubeadmControlPlaneArgs()})
	if err := b.Client.Create(ctx, capienv.IdentityGrant("default", tenant)); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	capienv.ClusterctlMove(t, a.kubeconfig, b.Kubeconfig, "default")
	capienv.AssertMovedAway(t, a.client, "default", tenant, anvilBefore)
	healthyIn(t, "B", b.Client, b.Kubeconfig, providerIDs)
	t.Logf("moved to B: healthy and Available %s after the move began", time.Since(moved).Round(time.Second))

	capienv.AwaitMoveReady(t, b.Client, "default", clusterName)
	back := time.Now()
	capienv.ClusterctlMove(t, b.Kubeconfig, a.kubeconfig, "default")
	if left := capienv.AnvilMachinesOfCluster(t, b.Client, "default"); len(left) != 0 {
		t.Errorf("AnvilMachines left in B after the move back: %d", len(left))
	}
	healthyIn(t, "A", a.client, a.kubeconfig, providerIDs)
	t.Logf("moved back to A: healthy and Available %s after the move began", time.Since(back).Round(time.Second))

	if gone := deleted(); len(gone) != 0 {
		t.Errorf("anvil Machines deleted or marked for deletion in A through the moves: %v", gone)
	}
	if after := capienv.AnvilMachines(t, a.client, tenant); len(after) != len(anvilBefore) {
		t.Errorf("anvil Machines in A: %v before the moves, %v after", anvilBefore, after)
	} else {
		for name, uid := range anvilBefore {
			if after[name] != uid {
				t.Errorf("anvil Machine %s/%s: UID %s before the moves, %q after", tenant, name, uid, after[name])
			}
		}
	}
	if after := nodeUIDs(t, workload); after != nodesBefore {
		t.Errorf("the workload cluster's Nodes: %s before the moves, %s after", nodesBefore, after)
	}
}

// healthyIn waits until the management cluster where (read with c, admin kubeconfig
// kubeconfig) holding the cluster after a move sees it as before: its AnvilCluster Ready
// through the identity, both Machines healthy with their Nodes and the providerIDs they had,
// the Cluster Available (KubeadmControlPlane reaches the workload cluster from there).
func healthyIn(t *testing.T, where string, c client.Client, kubeconfig string, providerIDs map[string]string) {
	t.Helper()
	capienv.AwaitAnvilClusterReady(t, c, "default", clusterName)
	capienv.ClusterHealthy(t, c, "default", clusterName, 2, tenant, 15*time.Minute)
	capienv.AssertProviderIDs(t, c, "default", providerIDs)
	env.WaitKubectlFor(t, kubeconfig, 15*time.Minute, "the Cluster Available in "+where, func(s string) bool { return s == "True" },
		"-n", "default", "get", "cluster", clusterName, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
}

// nodeUIDs is the workload cluster's Nodes, name=UID, in name order.
func nodeUIDs(t *testing.T, workload string) string {
	t.Helper()
	out, err := env.Kubectl(t, workload, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.uid} {end}`)
	if err != nil || len(strings.Fields(out)) != 2 {
		t.Fatalf("the workload cluster's Nodes: %v %q", err, out)
	}
	return strings.TrimSpace(out)
}
