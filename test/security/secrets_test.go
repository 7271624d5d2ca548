package security

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/config/rbac"
)

// metalNamespace is the infrastructure namespace the shipped metal Role is made for.
const metalNamespace = "anvil-metal"

// secretTry is one Secret request an identity makes, and whether it must be allowed.
type secretTry struct {
	what    string
	allowed bool
	do      func(ctx context.Context, c client.WithWatch) error
}

// trySecrets makes each request as user (in groups) through impersonation and checks the
// answers, listing each.
func trySecrets(t *testing.T, who, user string, groups []string, tries []secretTry) {
	t.Helper()
	ctx := context.Background()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, s := range tries {
		err := s.do(ctx, c)
		answer := "allowed"
		if err != nil {
			answer = string(apierrors.ReasonForError(err)) + ": " + err.Error()
		}
		t.Logf("%s: %-50s -> %s", who, s.what, answer)
		switch {
		case s.allowed && err != nil:
			t.Errorf("%s: %s: %v, want it allowed (it needs it)", who, s.what, err)
		case !s.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: %s: %v, want Forbidden", who, s.what, err)
		case !s.allowed:
			refused++
		}
	}
	t.Logf("%s: %d Secret requests tried, %d refused", who, len(tries), refused)
}

func getSecret(ns, name string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	}
}

func listSecrets(opts ...client.ListOption) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.SecretList{}, opts...) }
}

func watchSecrets(opts ...client.ListOption) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		w, err := c.Watch(ctx, &corev1.SecretList{}, opts...)
		if err == nil {
			w.Stop()
		}
		return err
	}
}

func createSecret(ns string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "planted-"}})
	}
}

// The attack: the credentials of a metal site (the shipped anvil-metal roles; a site
// host, compromised) read tenants' Secrets, or plant one. The site's Secrets are in its
// infrastructure namespace, and only there does it reach Secrets.
func TestMetalSiteReachesSecretsOnlyInItsNamespace(t *testing.T) {
	ctx := context.Background()
	if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metalNamespace}})); err != nil {
		t.Fatal(err)
	}
	tenantNS := newNamespace(t, "victim")
	create(t, env.Client,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "db-password"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: metalNamespace, Name: "bmc-" + tenantNS}})
	imp, err := rbac.InstallMetal(ctx, env.Client, metalNamespace)
	if err != nil {
		t.Fatal(err)
	}
	user := imp.UserName
	trySecrets(t, "metal site", user, imp.Groups, []secretTry{
		{"get a tenant's Secret", false, getSecret(tenantNS, "db-password")},
		{"list Secrets in a tenant namespace", false, listSecrets(client.InNamespace(tenantNS))},
		{"list Secrets of every namespace", false, listSecrets()},
		{"watch Secrets of every namespace", false, watchSecrets()},
		{"create a Secret in a tenant namespace", false, createSecret(tenantNS)},
		{"get a BMC Secret in " + metalNamespace, true, getSecret(metalNamespace, "bmc-"+tenantNS)},
		{"list Secrets in " + metalNamespace, true, listSecrets(client.InNamespace(metalNamespace))},
		{"watch Secrets in " + metalNamespace, true, watchSecrets(client.InNamespace(metalNamespace))},
		{"create a config-drive Secret in " + metalNamespace, true, createSecret(metalNamespace)},
	})
}

// The attack: the controller manager's credentials (the shipped anvil-manager role) dump
// every Secret of the cluster with one list or watch. The manager reads Secrets only by
// name (the Secrets an OSImage or a Machine names; holding get is also what lets it grant
// a poollet get on its Machines' Secrets), so list and watch are refused.
func TestManagerCannotListSecrets(t *testing.T) {
	tenantNS := newNamespace(t, "victim")
	create(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "referenced"}})
	manager(t) // installs the shipped manager role and binding
	trySecrets(t, "manager", "system:serviceaccount:anvil-system:anvil-controller-manager",
		[]string{"system:serviceaccounts", "system:serviceaccounts:anvil-system"}, []secretTry{
			{"list Secrets of every namespace", false, listSecrets()},
			{"list Secrets in a tenant namespace", false, listSecrets(client.InNamespace(tenantNS))},
			{"watch Secrets of every namespace", false, watchSecrets()},
			{"watch Secrets in a tenant namespace", false, watchSecrets(client.InNamespace(tenantNS))},
			{"get a Secret it is named (context, user data)", true, getSecret(tenantNS, "referenced")},
			{"create a builder's Secret", true, createSecret(tenantNS)},
		})
}
