package poollet_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
)

// The poollet runs as its own ServiceAccount with the shipped role
// (config/rbac/poollet) and the Secret access the manager grants: it gets its Machine's
// Secret, and no other Secret.
func TestPoolletRunsWithItsOwnNarrowIdentity(t *testing.T) {
	startControllers(t)
	ctx := context.Background()
	pool := "narrow"
	identity := poolletIdentity(t, pool)
	startPool(t, &testPool{t: t, name: pool, restConfig: identity}, nil)

	ns := "ns-" + pool
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mine", "someone-elses"} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{computev1alpha1.DefaultUserDataKey: []byte("#cloud-config\n")}}); err != nil {
			t.Fatal(err)
		}
	}
	m := newMachine(t, pool, "vm", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "mine"}
	})
	waitFor(t, m, "ran with its Secret, as the poollet's own identity", inState(computev1alpha1.MachineStateRunning))

	as, err := client.New(identity, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, &corev1.Secret{}); err != nil {
		t.Errorf("the poollet cannot read its Machine's Secret: %v", err)
	}
	if err := as.Get(ctx, client.ObjectKey{Namespace: ns, Name: "someone-elses"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a Secret no Machine of the pool references: %v, want Forbidden", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets: %v, want Forbidden", err)
	}
}

// poolletIdentity installs pool's poollet identity (its ServiceAccount, the shipped
// roles) and returns a config acting as it.
func poolletIdentity(t *testing.T, pool string) *rest.Config {
	t.Helper()
	imp, err := rbac.InstallPoollet(context.Background(), env.Client, pool)
	if err != nil {
		t.Fatal(err)
	}
	identity := rest.CopyConfig(env.Config)
	identity.Impersonate = imp
	return identity
}
