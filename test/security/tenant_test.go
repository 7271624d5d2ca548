package security

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// The tenant attack suite: a tenant's real token (a TokenRequest of a ServiceAccount in its
// namespace, bound to the shipped anvil-tenant role as an operator onboarding a tenant
// would) tries what a hostile tenant would to reach past its Machines: another tenant's
// Secrets and Machines, the infrastructure's Hosts and BMC credentials, the pools and
// their heartbeats, the admission policies that guard binding, anvil's own records, and
// ways to widen its own rights. Every answer is logged; what a tenant needs still works.
func TestTenantTokenAttackSuite(t *testing.T) {
	ctx := context.Background()
	mine, theirs, infra := newNamespace(t, "tenant-a"), newNamespace(t, "tenant-b"), newNamespace(t, "infra")
	const sa = "deployer"
	if err := env.InstallTenant(ctx, "system:serviceaccount:"+mine+":"+sa, mine); err != nil {
		t.Fatal(err)
	}
	tenant := serviceAccountToken(t, mine, sa)
	pool := "pool-" + mine
	create(t, env.Client,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: theirs, Name: "user-data"}, StringData: map[string]string{"userData": "theirs"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "bmc"}, StringData: map[string]string{"password": "root"}},
		machine(theirs, "victim", ""),
		&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: pool}},
	)

	get := func(c client.Object, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			return tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)
		}
	}
	list := func(l client.ObjectList, opts ...client.ListOption) func(context.Context) error {
		return func(ctx context.Context) error { return tenant.List(ctx, l, opts...) }
	}
	createAs := func(o client.Object) func(context.Context) error {
		return func(ctx context.Context) error { return tenant.Create(ctx, o) }
	}
	// patchOwn changes the tenant's own Machine (read afresh) with change.
	patchOwn := func(status bool, change func(*computev1alpha1.Machine)) func(context.Context) error {
		return func(ctx context.Context) error {
			m := &computev1alpha1.Machine{}
			if err := tenant.Get(ctx, client.ObjectKey{Namespace: mine, Name: "mine"}, m); err != nil {
				return err
			}
			p := client.MergeFrom(m.DeepCopy())
			change(m)
			if status {
				return tenant.Status().Patch(ctx, m, p)
			}
			return tenant.Patch(ctx, m, p)
		}
	}
	// impersonating lists tenant B's Secrets with the tenant's token, asking to act as user.
	impersonating := func(user string) func(context.Context) error {
		return func(ctx context.Context) error {
			cfg := tokenConfig(tokenOf(t, mine, sa))
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
			if err != nil {
				return err
			}
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(theirs))
		}
	}

	attempts := []attempt{
		// What a tenant does.
		{"create Machine mine in its namespace", true, createAs(machine(mine, "mine", ""))},
		{"list Machines in its namespace", true, list(&computev1alpha1.MachineList{}, client.InNamespace(mine))},
		{"create a first-boot Secret in its namespace", true, createAs(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "ud"}})},
		{"list HardwareData in its namespace", true, list(&metalv1alpha1.HardwareDataList{}, client.InNamespace(mine))},
		{"list MachineClasses", true, list(&computev1alpha1.MachineClassList{})},
		// Another tenant's data.
		{"get Secret user-data of tenant B", false, get(&corev1.Secret{}, theirs, "user-data")},
		{"list Secrets of tenant B", false, list(&corev1.SecretList{}, client.InNamespace(theirs))},
		{"list Secrets of every namespace", false, list(&corev1.SecretList{})},
		{"get Machine victim of tenant B", false, get(&computev1alpha1.Machine{}, theirs, "victim")},
		{"create a Machine in tenant B's namespace", false, createAs(machine(theirs, "planted", ""))},
		{"delete Machine victim of tenant B", false, func(ctx context.Context) error { return tenant.Delete(ctx, machine(theirs, "victim", "")) }},
		{"list HardwareData of every namespace", false, list(&metalv1alpha1.HardwareDataList{})},
		// The infrastructure.
		{"get the BMC Secret in the infrastructure namespace", false, get(&corev1.Secret{}, infra, "bmc")},
		{"list Hosts", false, list(&metalv1alpha1.HostList{})},
		{"create a Host (a BMC address of its choosing) in its namespace", false, createAs(&metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "h"}})},
		{"create a HostPolicy letting its namespace use Hosts", false, createAs(&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "p"},
			Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{mine}}})},
		{"forge HardwareData in its namespace", false, createAs(&metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "mine"}})},
		{"list namespaces", false, list(&corev1.NamespaceList{})},
		// Pools, binding and what the runtime reports.
		{"create Machine pinned to " + pool, false, createAs(machine(mine, "pinned", pool))},
		{"bind its Machine mine to " + pool, false, patchOwn(false, func(m *computev1alpha1.Machine) {
			m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
		})},
		{"write its Machine's status (Running, an address)", false, patchOwn(true, func(m *computev1alpha1.Machine) {
			m.Status.State = computev1alpha1.MachineStateRunning
		})},
		{"add itself to " + pool + "'s tenants", false, func(ctx context.Context) error {
			p := &computev1alpha1.MachinePool{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil {
				return err
			}
			return tenant.Patch(ctx, p, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"tenants":["`+mine+`"]}}`)))
		}},
		{"create a MachinePool", false, createAs(&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "mine-" + mine}})},
		{"renew " + pool + "'s Lease", false, createAs(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: pool}})},
		// The guards themselves, and anvil's records.
		{"delete the binding admission policy", false, func(ctx context.Context) error {
			return tenant.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "anvil-machine-binding"}})
		}},
		{"create an OSImageBuild (anvil's record of a build)", false, createAs(&imagesv1alpha1.OSImageBuild{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "b"}})},
		// Widening its own rights.
		{"bind itself cluster-admin in its namespace", false, createAs(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "escalate"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: mine, Name: sa}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}})},
		{"ask for a token of a poollet's ServiceAccount", false, func(ctx context.Context) error {
			return tenant.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "anvil-system", Name: "poollet-" + pool}},
				&authenticationv1.TokenRequest{})
		}},
		{"impersonate the manager's ServiceAccount", false, impersonating("system:serviceaccount:anvil-system:anvil-controller-manager")},
	}
	tryAll(t, "tenant "+mine, attempts, nil)
}
