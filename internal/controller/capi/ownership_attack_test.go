package capi

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// Two writes the provider made by name, without asking whose the object was: an AnvilMachine
// foo overwrote an unrelated Secret foo with its first-boot data (Cluster API's
// <cluster>-kubeconfig, say), and a Machine's dataSecretName booted any Secret of the
// namespace into a guest the tenant controls.
func TestProviderWritesAndBootsOnlyItsOwnSecrets(t *testing.T) {
	env := startProvider(t)
	ctx := context.Background()
	ns := namespace(t, env.Client, "tenant")
	newCluster(t, env.Client, ns, "c", nil)
	if err := env.Client.Create(ctx, bootstrapData(ns, "c", "boot")); err != nil {
		t.Fatal(err)
	}

	// 1. A Secret foo, not the provider's, and AnvilMachine foo.
	foo := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo", Labels: map[string]string{"app": "other"}},
		Data: map[string][]byte{"value": []byte("someone else's")}}
	if err := env.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	newMachine(t, env.Client, ns, "c", "foo", "boot")
	awaitReady(t, env.Client, &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo"}}, infrav1.ReasonSecretNameTaken, 30*time.Second)
	after := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foo), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != foo.ResourceVersion || !equality.Semantic.DeepEqual(after.Data, foo.Data) || !equality.Semantic.DeepEqual(after.Labels, foo.Labels) {
		t.Errorf("Secret foo was written: labels %v, data %q", after.Labels, after.Data)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foo"}, &computev1alpha1.Machine{}); !apierrors.IsNotFound(err) {
		t.Errorf("anvil Machine foo: %v, want none", err)
	}

	// 2. A Machine naming the cluster's kubeconfig Secret (labelled for the cluster, a value
	// key, owned by no bootstrap provider) as its bootstrap data.
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n# the admin's credentials")}}
	if err := env.Client.Create(ctx, kubeconfig); err != nil {
		t.Fatal(err)
	}
	newMachine(t, env.Client, ns, "c", "steal", "c-kubeconfig")
	awaitReady(t, env.Client, &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steal"}}, infrav1.ReasonBootstrapDataNotOwned, 30*time.Second)
	for _, obj := range []client.Object{&computev1alpha1.Machine{}, &corev1.Secret{}} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "steal"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T steal: %v, want none", obj, err)
		}
	}

	// The provider's own path still works: a bootstrap provider's Secret boots, and the
	// first-boot Secret is the AnvilMachine's.
	newMachine(t, env.Client, ns, "c", "good", "boot")
	awaitReady(t, env.Client, &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}}, infrav1.ReasonProvisioning, 30*time.Second)
	fb := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, fb); err != nil {
		t.Fatal(err)
	}
	if len(fb.OwnerReferences) != 1 || fb.OwnerReferences[0].Kind != "AnvilMachine" || fb.Labels[infrav1.AnvilMachineLabel] != "good" {
		t.Errorf("first-boot Secret: owners %v, labels %v", fb.OwnerReferences, fb.Labels)
	}
}
