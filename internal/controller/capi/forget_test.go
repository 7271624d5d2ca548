package capi

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/test/harness"
)

// An AnvilCluster that is gone (clusterctl move deletes it from the old management cluster)
// stops its remote cache: the old manager kept watching the other anvil's namespace with the
// identity for as long as it ran.
func TestGoneAnvilClusterStopsItsRemote(t *testing.T) {
	env, err := harness.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := crd.InstallClusterAPIProvider(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	raw, err := env.AdminKubeconfig("identity")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts[kc.CurrentContext].Namespace = "default"
	if raw, err = clientcmd.Write(*kc); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "identity", Namespace: "default"}, Data: map[string][]byte{"value": raw}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cs := &Computes{Scheme: env.Scheme, APIReader: env.Client, OnRemote: func(cluster.Cluster, string) error { return nil }, AllowLoopback: true}
	cs.setContext(ctx)
	// Never created, as one clusterctl has deleted: For is what a reconcile before the
	// move did.
	ac := &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: "moved", Namespace: "default"},
		Spec: infrav1.AnvilClusterSpec{IdentityRef: &infrav1.IdentityReference{Name: "identity", Key: "value"}}}
	// The connection is made in the background: For says so until it is.
	deadline := time.Now().Add(30 * time.Second)
	for _, err := cs.For(ctx, ac); err != nil; _, err = cs.For(ctx, ac) {
		if !isConnecting(err) || time.Now().After(deadline) {
			t.Fatalf("For: %v", err)
		}
	}
	key := types.NamespacedName{Namespace: ac.Namespace, Name: ac.Name}
	if _, ok := cs.remotes[key]; !ok {
		t.Fatal("For made no remote")
	}
	r := &AnvilClusterReconciler{Client: env.Client, Computes: cs}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if _, ok := cs.remotes[key]; ok {
		t.Error("the remote of a gone AnvilCluster is still running")
	}
}
