package security

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// newNamespace creates a namespace with a generated name.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	create(t, env.Client, ns)
	return ns.Name
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// tenant is user, given the shipped tenant roles in ns, and a client acting as that user.
func tenant(t *testing.T, user, ns string) client.Client {
	t.Helper()
	if err := env.InstallTenant(context.Background(), user, ns); err != nil {
		t.Fatal(err)
	}
	return as(t, user)
}

// manager is a client acting as the controller manager's ServiceAccount, with the shipped
// anvil-manager role (the scheduler's identity).
func manager(t *testing.T) client.Client {
	t.Helper()
	if err := client.IgnoreAlreadyExists(env.Client.Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "anvil-system"}})); err != nil {
		t.Fatal(err)
	}
	if err := env.InstallRBAC(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	return as(t, "system:serviceaccount:anvil-system:anvil-controller-manager", "system:serviceaccounts", "system:serviceaccounts:anvil-system")
}

// as is a client acting as user (in groups), through the apiserver's impersonation.
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	c, err := env.As(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
