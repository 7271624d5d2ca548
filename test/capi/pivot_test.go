package capi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
)

// End to end 4 of issue 17, on the fake pool: `clusterctl move` of a Cluster from management
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
	identity := tenantIdentity(t, tenant)
	startTenantStandIns(t, r, tenant)
	b := startManagementCluster(t)
	for _, c := range []client.Client{env.Client, b.client} {
		if err := capienv.InstallInventory(ctx, c, "capi-system"); err != nil {
			t.Fatal(err)
		}
	}

	const name = "pivot"
	cluster := newClusterWithIdentity(t, r, ns, name, identity)
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	md := newMachineDeployment(t, cluster, "md", machineSpec(r, computev1alpha1.ArchitectureAMD64), "", 1)
	clusterHealthy(t, env.Client, ns, name, 2, tenant)
	capienv.Eventually(t, time.Minute, "identity Secret labelled for the move by the provider", func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-identity"}, s); err != nil {
			return err
		}
		if _, ok := s.Labels[infrav1.LabelMove]; !ok {
			return fmt.Errorf("labels %v", s.Labels)
		}
		return nil
	})
	before := anvilMachines(t, tenant)
	if len(before) != 2 {
		t.Fatalf("anvil Machines in %s before the move: %v, want the control plane's and the worker's", tenant, before)
	}
	providerIDs := map[string]string{}
	for _, am := range anvilMachinesOfCluster(t, env.Client, ns) {
		providerIDs[am.Name] = am.Spec.ProviderID
		if _, ok := am.Annotations[infrav1.AnnotationBlockMove]; ok {
			t.Errorf("AnvilMachine %s is provisioned and still blocks the move", am.Name)
		}
	}

	deleted := watchDeletions(t, tenant)
	start := time.Now()
	clusterctlMove(t, r.capi.Kubeconfig(), b.kubeconfig, ns)
	t.Logf("clusterctl move took %s", time.Since(start).Round(100*time.Millisecond))

	// A: the Cluster API objects are gone, the anvil Machines are the same objects.
	if left := anvilMachinesOfCluster(t, env.Client, ns); len(left) != 0 {
		t.Errorf("AnvilMachines left in A after the move: %d", len(left))
	}
	if after := anvilMachines(t, tenant); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("anvil Machines in A changed with the move: before %v, after %v", before, after)
	}

	// B: the moved objects reconcile through the identity; the Machines are healthy again.
	capienv.Eventually(t, 2*time.Minute, "AnvilCluster in B Ready through the identity", func() error {
		ac := &infrav1.AnvilCluster{}
		if err := b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ac); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(ac.Status.Conditions, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	clusterHealthy(t, b.client, ns, name, 2, tenant)
	for _, am := range anvilMachinesOfCluster(t, b.client, ns) {
		if am.Spec.ProviderID != providerIDs[am.Name] {
			t.Errorf("AnvilMachine %s in B has providerID %q, in A it had %q", am.Name, am.Spec.ProviderID, providerIDs[am.Name])
		}
	}

	// Scaling in B makes a new anvil Machine in A's tenant namespace; the old ones stay.
	cur := &clusterv1.MachineDeployment{}
	if err := b.client.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.Replicas = new(int32(2))
	if err := b.client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatalf("scaling %s in B: %v", md.Name, err)
	}
	clusterHealthy(t, b.client, ns, name, 3, tenant)
	after := anvilMachines(t, tenant)
	if len(after) != 3 {
		t.Fatalf("anvil Machines in A after scaling in B: %v, want 3", after)
	}
	for n, uid := range before {
		if after[n] != uid {
			t.Errorf("anvil Machine %s/%s: UID %s before the move, %q after scaling in B", tenant, n, uid, after[n])
		}
	}

	if d := deleted(); len(d) != 0 {
		t.Errorf("anvil Machines of %s deleted or marked for deletion through the move and the scaling: %v", tenant, d)
	}

	// The identity reaches its tenant namespace only: never A's BMC credentials.
	bmc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bmc-pivot", Namespace: "anvil-metal"},
		StringData: map[string]string{"username": "admin", "password": "not-for-tenants"}}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bmc.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, bmc); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	ic := identityClient(t, identity)
	if err := ic.Get(ctx, client.ObjectKeyFromObject(bmc), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading A's BMC credentials Secret with the identity kubeconfig: %v, want 403 Forbidden", err)
	}
	if err := ic.List(ctx, &corev1.SecretList{}, client.InNamespace(tenant)); !apierrors.IsForbidden(err) {
		t.Errorf("listing the tenant namespace's Secrets with the identity kubeconfig: %v, want 403 Forbidden", err)
	}
}

// tenantIdentity makes, in A's namespace tenant, a ServiceAccount bound to a Role allowing
// exactly what the provider does there (anvil Machines; first-boot Secrets by name, never
// listed), and returns a kubeconfig for it whose current
// context names tenant: what an infrastructure admin of A hands to a cluster's owner.
func tenantIdentity(t *testing.T, tenant string) []byte {
	t.Helper()
	ctx := context.Background()
	const sa = "capi-identity"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{computev1alpha1.GroupVersion.Group}, Resources: []string{"machines"},
				Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: tenant}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(tenant).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", tenant, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["a"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["a"] = &clientcmdapi.Context{Cluster: "a", AuthInfo: sa, Namespace: tenant}
	kc.CurrentContext = "a"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// identityClient is a client acting with the identity kubeconfig.
func identityClient(t *testing.T, kubeconfig []byte) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startTenantStandIns registers a stand-in Node (see standIns) for every running anvil
// Machine of A's namespace tenant, from the providerID in its first-boot metadata, as the
// guest's agent would: whichever management cluster holds its AnvilMachine.
func startTenantStandIns(t *testing.T, r *rig, tenant string) {
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

// management is management cluster B: its own control plane, Cluster API manager and anvil
// manager with the provider, and no pools.
type management struct {
	client     client.Client
	kubeconfig string // admin, for clusterctl
}

func startManagementCluster(t *testing.T) *management {
	t.Helper()
	ctx := context.Background()
	bin, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{StateDir: t.TempDir(), BinDir: bin,
		APIServerPort: harness.FreePort(t), EtcdClientPort: harness.FreePort(t), EtcdPeerPort: harness.FreePort(t)})
	if err != nil {
		t.Fatalf("management cluster B: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping management cluster B: %v", err)
		}
	})
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, c); err != nil {
		t.Fatalf("anvil's CRDs in B: %v", err)
	}
	capi, err := capienv.Start(ctx, cp.RESTConfig(), capienv.Options{})
	if err != nil {
		t.Fatalf("Cluster API in B: %v", err)
	}
	t.Cleanup(func() {
		if err := capi.Stop(); err != nil {
			t.Errorf("Cluster API in B: %v", err)
		}
	})
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	o.ImageArchitectures = manager.ImageArchitecturesAny
	o.ClusterAPI = true
	mgr, err := manager.New(cp.RESTConfig(), o)
	if err != nil {
		t.Fatalf("anvil's manager in B: %v", err)
	}
	harness.RunManager(t, mgr)
	return &management{client: c, kubeconfig: cp.KubeconfigPath()}
}

// clusterctlMove runs bin/clusterctl move of namespace ns from one management cluster to the
// other, with no configuration of the user's and no call to GitHub.
func clusterctlMove(t *testing.T, from, to, ns string) {
	t.Helper()
	bin, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	clusterctl := filepath.Join(bin, "clusterctl")
	if _, err := os.Stat(clusterctl); err != nil {
		t.Fatalf("%s is missing: run \"make tools\": %v", clusterctl, err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, clusterctl, "move", "--kubeconfig", from, "--to-kubeconfig", to, "-n", ns, "-v", "1")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl move: %v\n%s", err, out)
	}
	t.Logf("clusterctl move:\n%s", out)
}

// clusterHealthy waits until the Cluster name of namespace ns (read with c) has n Machines,
// each Running with a healthy Node, on an AnvilMachine whose providerID names an anvil
// Machine in A's namespace tenant.
func clusterHealthy(t *testing.T, c client.Client, ns, name string, n int, tenant string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	capienv.Eventually(t, 3*time.Minute, fmt.Sprintf("Cluster %s/%s with %d healthy Machines", ns, name, n), func() error {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d Machines", len(list.Items))
		}
		for i := range list.Items {
			m := &list.Items[i]
			if err := capienv.Healthy(m); err != nil {
				return err
			}
			if want := infrav1.ProviderIDScheme + tenant + "/" + m.Spec.InfrastructureRef.Name; m.Spec.ProviderID != want {
				return fmt.Errorf("Machine %s has providerID %q, want %q", m.Name, m.Spec.ProviderID, want)
			}
		}
		return nil
	})
	t.Logf("Cluster %s/%s: %d healthy Machines after %s", ns, name, n, time.Since(start).Round(100*time.Millisecond))
}

// anvilMachines are the anvil Machines of A's namespace tenant (name → UID); it fails on one
// being deleted.
func anvilMachines(t *testing.T, tenant string) map[string]types.UID {
	t.Helper()
	list := &computev1alpha1.MachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, m := range list.Items {
		if m.DeletionTimestamp != nil {
			t.Errorf("anvil Machine %s/%s is being deleted", m.Namespace, m.Name)
		}
		out[m.Name] = m.UID
	}
	return out
}

// watchDeletions watches the anvil Machines of A's namespace tenant from now on; the function
// it returns stops and says which were deleted or marked for deletion meanwhile. A watch the
// apiserver or the connection ends is resumed from the last resourceVersion seen, so no event
// is missed; one that cannot be resumed (too old) is reported.
func watchDeletions(t *testing.T, tenant string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	list := &computev1alpha1.MachineList{}
	if err := wc.List(ctx, list, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, &computev1alpha1.MachineList{}, client.InNamespace(tenant),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				if ctx.Err() == nil {
					seen = append(seen, fmt.Sprintf("watching from resourceVersion %s: %v", rv, err))
				}
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() != nil {
						break // stopped: the stream reports its own cancellation
					}
					err := apierrors.FromObject(ev.Object)
					if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
						seen = append(seen, fmt.Sprintf("the watch cannot resume from %s: %v", rv, err))
						w.Stop()
						return
					}
					t.Logf("watch of %s ended (%v): resuming from resourceVersion %s", tenant, err, rv)
					break
				}
				m, ok := ev.Object.(*computev1alpha1.Machine)
				if !ok {
					seen = append(seen, fmt.Sprintf("watch event %s of %T", ev.Type, ev.Object))
					continue
				}
				rv = m.ResourceVersion
				switch {
				case ev.Type == watch.Bookmark:
				case ev.Type == watch.Deleted:
					seen = append(seen, m.Name+" deleted")
				case m.DeletionTimestamp != nil:
					seen = append(seen, m.Name+" marked for deletion")
				}
			}
			w.Stop()
		}
	}()
	return func() []string {
		cancel()
		<-done
		return seen
	}
}

// anvilMachinesOfCluster lists the AnvilMachines of namespace ns with c, by name.
func anvilMachinesOfCluster(t *testing.T, c client.Client, ns string) []infrav1.AnvilMachine {
	t.Helper()
	list := &infrav1.AnvilMachineList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}
