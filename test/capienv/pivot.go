package capienv

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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/harness/controlplanes"
)

// What the tests of clusterctl move (a pivot) share: management cluster A is the
// test's own control plane with anvil, its pools and Cluster API; B is StartManagementCluster's.

// TenantIdentity makes, in namespace tenant of the anvil of cfg (A), a ServiceAccount bound
// to a Role allowing exactly what the provider does there (anvil Machines; first-boot
// Secrets by name, never listed), and returns a kubeconfig for it whose current context
// names tenant: what an infrastructure admin of A hands to a cluster's owner, for an
// AnvilCluster's identityRef.
func TenantIdentity(t testing.TB, cfg *rest.Config, tenant string) []byte {
	t.Helper()
	ctx := context.Background()
	c, err := Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const sa = "capi-identity"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{computev1alpha1.GroupVersion.Group}, Resources: []string{"machines"},
				Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "patch"}},
			// The control-plane LoadBalancer of an AnvilCluster with controlPlaneLoadBalancer,
			// read by name and made there.
			{APIGroups: []string{computev1alpha1.GroupVersion.Group}, Resources: []string{"loadbalancers"}, Verbs: []string{"get", "create"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: tenant},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: tenant}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(tenant).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", tenant, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["a"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["a"] = &clientcmdapi.Context{Cluster: "a", AuthInfo: sa, Namespace: tenant}
	kc.CurrentContext = "a"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// WithIdentity makes the AnvilCluster among a Cluster's objects (Cluster's) name, in
// spec.identityRef, a Secret <name>-identity holding the kubeconfig identity for namespace
// tenant, which it puts first, after the admin's grant of tenant to the Cluster's namespace
// (IdentityGrant). The Secret is labelled as the cluster's, so the provider labels it for
// `clusterctl move`.
func WithIdentity(cluster *clusterv1.Cluster, objs []client.Object, identity []byte, tenant string) []client.Object {
	secret := cluster.Name + "-identity"
	for _, o := range objs {
		if ac, ok := o.(*infrav1.AnvilCluster); ok {
			ac.Spec.IdentityRef = &infrav1.IdentityReference{Name: secret}
		}
	}
	return append([]client.Object{IdentityGrant(cluster.Namespace, tenant),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: cluster.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
			Data: map[string][]byte{"value": identity}}}, objs...)
}

// IdentityGrant is the AnvilClusterIdentity an infrastructure admin makes in each management
// cluster so that AnvilClusters of namespace ns may use identities for namespace tenant.
// clusterctl does not move it: make it in the target too.
func IdentityGrant(ns, tenant string) *infrav1.AnvilClusterIdentity {
	return &infrav1.AnvilClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: ns + "-to-" + tenant},
		Spec: infrav1.AnvilClusterIdentitySpec{RemoteNamespace: tenant, AllowedNamespaces: []string{ns}}}
}

// IdentityClient is a client acting with an identity kubeconfig.
func IdentityClient(t testing.TB, kubeconfig []byte) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// AssertNoBMCCredentials checks that identity, a kubeconfig TenantIdentity made for namespace
// tenant of the anvil of cfg, gets 403 reading a BMC credentials Secret of anvil-metal there
// (which it makes) and listing its own namespace's Secrets.
func AssertNoBMCCredentials(t testing.TB, cfg *rest.Config, identity []byte, tenant string) {
	t.Helper()
	ctx := context.Background()
	c, err := Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bmc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bmc-pivot", Namespace: "anvil-metal"},
		StringData: map[string]string{"username": "admin", "password": "not-for-tenants"}}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bmc.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, bmc); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	ic := IdentityClient(t, identity)
	if err := ic.Get(ctx, client.ObjectKeyFromObject(bmc), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading A's BMC credentials Secret with the identity kubeconfig: %v, want 403 Forbidden", err)
	}
	if err := ic.List(ctx, &corev1.SecretList{}, client.InNamespace(tenant)); !apierrors.IsForbidden(err) {
		t.Errorf("listing the tenant namespace's Secrets with the identity kubeconfig: %v, want 403 Forbidden", err)
	}
}

// Management is management cluster B: its own control plane, Cluster API manager and anvil
// manager with the provider, and no pools.
type Management struct {
	Client     client.Client
	Kubeconfig string // admin, for clusterctl
}

// StartManagementCluster starts B for the rest of the test, its Cluster API managers run with
// capi, with clusterctl's provider inventory of those managers recorded (as InstallInventory
// does): a target clusterctl move accepts.
func StartManagementCluster(t testing.TB, capi Options) *Management {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	cp, err := controlplanes.Start(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("management cluster B: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping management cluster B: %v", err)
		}
	})
	c, err := Client(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, c); err != nil {
		t.Fatalf("anvil's CRDs in B: %v", err)
	}
	manager, err := Start(ctx, cp.RESTConfig(), capi)
	if err != nil {
		t.Fatalf("Cluster API in B: %v", err)
	}
	t.Cleanup(func() {
		if err := manager.Stop(); err != nil {
			t.Errorf("Cluster API in B: %v", err)
		}
	})
	stop, err := RunAnvilManager(ctx, cp.RESTConfig(), extension.Options{})
	if err != nil {
		t.Fatalf("anvil's manager in B: %v", err)
	}
	t.Cleanup(stop)
	if err := installInventory(ctx, c, "capi-system", capi.providers()); err != nil {
		t.Fatal(err)
	}
	t.Logf("management cluster B started in %s", time.Since(start).Round(100*time.Millisecond))
	return &Management{Client: c, Kubeconfig: cp.KubeconfigPath()}
}

// ClusterctlMove runs bin/clusterctl move of namespace ns from one management cluster to the
// other (admin kubeconfig files), with no configuration of the user's and no call to GitHub.
func ClusterctlMove(t testing.TB, from, to, ns string) {
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
	start := time.Now()
	cmd := exec.CommandContext(ctx, clusterctl, "move", "--kubeconfig", from, "--to-kubeconfig", to, "-n", ns, "-v", "1")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl move: %v\n%s", err, out)
	}
	t.Logf("clusterctl move took %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
}

// ClusterHealthy waits up to timeout until the Cluster name of namespace ns (read with c)
// has n Machines, each Running with a healthy Node, on an AnvilMachine whose providerID
// names an anvil Machine in A's namespace tenant, and returns them.
func ClusterHealthy(t testing.TB, c client.Client, ns, name string, n int, tenant string, timeout time.Duration) []clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	list := &clusterv1.MachineList{}
	Eventually(t, timeout, fmt.Sprintf("Cluster %s/%s with %d healthy Machines", ns, name, n), func() error {
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d Machines", len(list.Items))
		}
		for i := range list.Items {
			m := &list.Items[i]
			if err := Healthy(m); err != nil {
				return err
			}
			if want := infrav1.ProviderIDScheme + tenant + "/" + m.Spec.InfrastructureRef.Name; m.Spec.ProviderID != want {
				return fmt.Errorf("Machine %s has providerID %q, want %q", m.Name, m.Spec.ProviderID, want)
			}
		}
		return nil
	})
	t.Logf("Cluster %s/%s: %d healthy Machines after %s", ns, name, n, time.Since(start).Round(100*time.Millisecond))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// AnvilMachines are the anvil Machines of namespace tenant read with c (name → UID); it
// fails on one being deleted.
func AnvilMachines(t testing.TB, c client.Client, tenant string) map[string]types.UID {
	t.Helper()
	list := &computev1alpha1.MachineList{}
	if err := c.List(context.Background(), list, client.InNamespace(tenant)); err != nil {
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

// WatchDeletions watches the anvil Machines of namespace tenant of the apiserver of cfg from
// now on; the function it returns stops and says which were deleted or marked for deletion
// meanwhile. A watch the apiserver or the connection ends is resumed from the last
// resourceVersion seen, so no event is missed; one that cannot be resumed (too old) is
// reported.
func WatchDeletions(t testing.TB, cfg *rest.Config, tenant string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
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

// AnvilMachinesOfCluster lists the AnvilMachines of namespace ns with c, by name.
func AnvilMachinesOfCluster(t testing.TB, c client.Client, ns string) []infrav1.AnvilMachine {
	t.Helper()
	list := &infrav1.AnvilMachineList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// AwaitMoveReady waits until the provider has labelled the identity Secret of the Cluster
// name of namespace ns for the move (clusterctl would leave it behind otherwise) and no
// AnvilMachine of ns blocks the move any more (each anvil Machine is provisioned), and
// returns each AnvilMachine's providerID by name.
func AwaitMoveReady(t testing.TB, c client.Client, ns, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	providerIDs := map[string]string{}
	Eventually(t, time.Minute, "identity Secret labelled for the move by the provider, no AnvilMachine blocking it", func() error {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-identity"}, s); err != nil {
			return err
		}
		if _, ok := s.Labels[infrav1.LabelMove]; !ok {
			return fmt.Errorf("identity Secret labels %v", s.Labels)
		}
		for _, am := range AnvilMachinesOfCluster(t, c, ns) {
			if _, ok := am.Annotations[infrav1.AnnotationBlockMove]; ok {
				return fmt.Errorf("AnvilMachine %s is provisioned and still blocks the move", am.Name)
			}
			providerIDs[am.Name] = am.Spec.ProviderID
		}
		return nil
	})
	return providerIDs
}

// AwaitAnvilClusterReady waits until the AnvilCluster name of namespace ns (read with c) is
// Ready: after a move, B's provider reaches A through the identity.
func AwaitAnvilClusterReady(t testing.TB, c client.Client, ns, name string) {
	t.Helper()
	Eventually(t, 2*time.Minute, "AnvilCluster "+ns+"/"+name+" Ready", func() error {
		ac := &infrav1.AnvilCluster{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ac); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(ac.Status.Conditions, infrav1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", cond)
		}
		return nil
	})
}

// AssertMovedAway checks management cluster A (read with c) right after a move of namespace
// ns: no AnvilMachine is left in ns, and the anvil Machines of tenant are the objects before
// (AnvilMachines) named.
func AssertMovedAway(t testing.TB, c client.Client, ns, tenant string, before map[string]types.UID) {
	t.Helper()
	if left := AnvilMachinesOfCluster(t, c, ns); len(left) != 0 {
		t.Errorf("AnvilMachines left in A after the move: %d", len(left))
	}
	if after := AnvilMachines(t, c, tenant); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("anvil Machines in A changed with the move: before %v, after %v", before, after)
	}
}

// AssertProviderIDs checks that the AnvilMachines of ns in B (read with c) have the
// providerIDs they had in A (AwaitMoveReady's).
func AssertProviderIDs(t testing.TB, c client.Client, ns string, inA map[string]string) {
	t.Helper()
	for _, am := range AnvilMachinesOfCluster(t, c, ns) {
		if am.Spec.ProviderID != inA[am.Name] {
			t.Errorf("AnvilMachine %s in B has providerID %q, in A it had %q", am.Name, am.Spec.ProviderID, inA[am.Name])
		}
	}
}

// AssertScaledInA checks, after scaling up in B, that A's namespace tenant (read with c) has
// n anvil Machines, among them the objects before (AnvilMachines) named.
func AssertScaledInA(t testing.TB, c client.Client, tenant string, before map[string]types.UID, n int) {
	t.Helper()
	after := AnvilMachines(t, c, tenant)
	if len(after) != n {
		t.Fatalf("anvil Machines in A after scaling in B: %v, want %d", after, n)
	}
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("anvil Machine %s/%s: UID %s before the move, %q after scaling in B", tenant, name, uid, after[name])
		}
	}
}
