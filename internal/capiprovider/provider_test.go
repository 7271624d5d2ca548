package capiprovider

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

func TestValidateNamesTheFlagToFix(t *testing.T) {
	cases := []struct {
		mutate func(*Options)
		flag   string
	}{
		{func(o *Options) { o.Concurrency = 0 }, "--concurrency"},
		{func(o *Options) {
			o.Extension = extension.Options{BindAddress: "127.0.0.1", CertDir: "/tmp", ClientCAFile: "/tmp/ca"}
		}, "--capi-extension-bind-address"},
		{func(o *Options) {
			o.Extension = extension.Options{BindAddress: "127.0.0.1:9444", ClientCAFile: "/tmp/ca"}
		}, "--capi-extension-cert-dir"},
		{func(o *Options) { o.Extension = extension.Options{BindAddress: "127.0.0.1:9444", CertDir: "/tmp"} }, "--capi-extension-client-ca"},
		{func(o *Options) {
			o.Extension = extension.Options{BindAddress: "127.0.0.1:9444", CertDir: "/tmp", ClientCAFile: "/nonexistent/ca.crt"}
		}, "--capi-extension-client-ca"},
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	for _, tc := range cases {
		o := DefaultOptions()
		tc.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.flag)
		}
	}
}

// The provider's only job needs Cluster API's kinds and anvil's provider CRDs: without
// them (this control plane has neither) it refuses to start and says what to install.
func TestNewWithoutTheProviderKindsSaysWhatToInstall(t *testing.T) {
	o := DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	_, err := New(env.Config, o)
	if err == nil || !strings.Contains(err.Error(), "config/crd/capi") {
		t.Fatalf("New() = %v, want an error naming what to install (config/crd/capi)", err)
	}
}

// The provider reads tenant-written kubeconfigs and bootstrap data; a bug there must not
// lend it the manager's rights. As its own ServiceAccount (as config/capi runs it) it may
// neither grant itself more (RoleBindings, ClusterRoles, escalate, bind), nor bind a pool
// (the scheduler's right), nor list or watch Secrets (secretaccess's), nor impersonate —
// while the manager's ServiceAccount, which ran the provider before, may bind pools and
// write Roles. Each refusal is the real apiserver's, asked by the provider's own client.
func TestProviderIdentityCannotGrantBindOrListSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "anvil-system"
	identity, err := rbac.InstallCAPIProvider(ctx, env.Client, ns)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = identity
	provider, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// Attempts, as the provider: each must be Forbidden.
	adminBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "provider-takes-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: rbac.CAPIProviderServiceAccount}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
	roleBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "provider-takes-secrets", Namespace: "default"},
		Subjects: adminBinding.Subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "provider-writes-roles"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	attempts := map[string]func() error{
		"create a ClusterRoleBinding to cluster-admin": func() error { return provider.Create(ctx, adminBinding) },
		"create a RoleBinding to admin":                func() error { return provider.Create(ctx, roleBinding) },
		"create a ClusterRole":                         func() error { return provider.Create(ctx, role) },
		"list Secrets":                                 func() error { return provider.List(ctx, &corev1.SecretList{}) },
		"list Secrets of one namespace":                func() error { return provider.List(ctx, &corev1.SecretList{}, client.InNamespace("default")) },
		"delete a Secret": func() error {
			return provider.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}})
		},
		"update a MachinePool": func() error {
			return provider.Update(ctx, &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
		},
	}
	for what, attempt := range attempts {
		if err := attempt(); !apierrors.IsForbidden(err) {
			t.Errorf("the provider's identity may %s: %v, want Forbidden", what, err)
		}
	}

	// Verbs no request shows: bind (a pool, a role), escalate, impersonate.
	user := identity.UserName
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Group: computev1alpha1.GroupVersion.Group, Resource: "machinepools", Verb: "bind", Name: "any"},
		{Group: rbacv1.GroupName, Resource: "clusterroles", Verb: "bind"},
		{Group: rbacv1.GroupName, Resource: "clusterroles", Verb: "escalate"},
		{Group: rbacv1.GroupName, Resource: "roles", Verb: "create", Namespace: "default"},
		{Resource: "users", Verb: "impersonate"},
		{Resource: "serviceaccounts", Verb: "impersonate", Namespace: ns},
		{Resource: "serviceaccounts/token", Verb: "create", Namespace: ns},
	} {
		if allowed(ctx, t, user, identity.Groups, ra) {
			t.Errorf("the provider's identity may %s %s.%s: want not", ra.Verb, ra.Resource, ra.Group)
		}
	}

	// What the provider needs, it has (its controllers' markers; the tests of
	// internal/controller/capi and test/capi run it under this identity).
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Group: computev1alpha1.GroupVersion.Group, Resource: "machines", Verb: "create", Namespace: "default"},
		{Resource: "secrets", Verb: "get", Namespace: "default", Name: "boot"},
		{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: ns},
	} {
		if !allowed(ctx, t, user, identity.Groups, ra) {
			t.Errorf("the provider's identity may not %s %s.%s in %q", ra.Verb, ra.Resource, ra.Group, ra.Namespace)
		}
	}

	// The manager's identity, which ran the provider before, holds those rights: the split
	// is what keeps them from the provider.
	if err := env.InstallRBAC(ctx, ""); err != nil {
		t.Fatal(err)
	}
	mgr := "system:serviceaccount:anvil-system:anvil-controller-manager"
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Group: computev1alpha1.GroupVersion.Group, Resource: "machinepools", Verb: "bind", Name: "any"},
		{Group: rbacv1.GroupName, Resource: "roles", Verb: "create", Namespace: "default"},
	} {
		if !allowed(ctx, t, mgr, nil, ra) {
			t.Errorf("the manager's identity may not %s %s: the comparison above proves nothing", ra.Verb, ra.Resource)
		}
	}
}

// allowed asks the apiserver whether user (in groups) may do ra.
func allowed(ctx context.Context, t *testing.T, user string, groups []string, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &ra}}
	if err := env.Client.Create(ctx, sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
