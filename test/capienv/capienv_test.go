package capienv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// capiClient is an admin client that also knows Cluster API's runtime kinds (anvil's
// scheme has its core kinds).
func capiClient(t *testing.T) client.Client {
	t.Helper()
	c, err := Client(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// clusterOn is a Cluster whose infrastructure is the AnvilCluster of the same name.
func clusterOn(ns, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: name}}}
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestManagerServesWebhooksAndReconciles(t *testing.T) {
	ctx := context.Background()
	c := capiClient(t)
	started := time.Now()
	capi, err := Start(ctx, env.Config, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = capi.Stop() })
	t.Logf("Start took %s", time.Since(started).Round(time.Millisecond))

	t.Run("installed as clusterctl init would", func(t *testing.T) {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd); err != nil {
			t.Fatal(err)
		}
		if v, ok := crd.Labels[ClusterctlLabel]; !ok || v != "" || crd.Labels[ProviderLabel] != "cluster-api" {
			t.Errorf("Cluster CRD labels = %v, want %s= and %s=cluster-api", crd.Labels, ClusterctlLabel, ProviderLabel)
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter {
			t.Errorf("Cluster CRD conversion = %+v, want the manager's webhook", crd.Spec.Conversion)
		}
		// anvil's CRDs are installed apart, so none converts through Cluster API's manager.
		anvil := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "anvilclusters.infrastructure.cluster.x-k8s.io"}, anvil); err != nil {
			t.Fatal(err)
		}
		if anvil.Spec.Conversion != nil && anvil.Spec.Conversion.Strategy != apiextv1.NoneConverter {
			t.Errorf("AnvilCluster CRD converts through %+v, want no conversion", anvil.Spec.Conversion)
		}
		role := &rbacv1.ClusterRole{}
		if err := c.Get(ctx, client.ObjectKey{Name: "anvil-cluster-api-manager"}, role); err != nil {
			t.Fatalf("the shipped ClusterRole for Cluster API's manager: %v", err)
		}
		if role.Labels["cluster.x-k8s.io/aggregate-to-manager"] != "true" {
			t.Errorf("ClusterRole labels = %v, want cluster.x-k8s.io/aggregate-to-manager=true", role.Labels)
		}
	})

	t.Run("inventory", func(t *testing.T) {
		for range 2 { // replacing what is there is fine
			if err := InstallInventory(ctx, c, "capi-system"); err != nil {
				t.Fatal(err)
			}
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("clusterctl.cluster.x-k8s.io/v1alpha3")
		list.SetKind("ProviderList")
		if err := c.List(ctx, list, client.InNamespace("capi-system")); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range list.Items {
			got[p.GetName()] = p.Object["type"].(string) + " " + p.Object["providerName"].(string) + " " + p.Object["version"].(string)
		}
		want := map[string]string{
			"cluster-api":          "CoreProvider cluster-api v1.14.2",
			"infrastructure-anvil": "InfrastructureProvider anvil " + AnvilProviderVersion,
		}
		if len(got) != len(want) || got["cluster-api"] != want["cluster-api"] || got["infrastructure-anvil"] != want["infrastructure-anvil"] {
			t.Errorf("providers = %v, want %v", got, want)
		}
	})

	ns := "webhooks"
	createNamespace(t, c, ns)

	t.Run("validating webhook refuses an invalid Cluster", func(t *testing.T) {
		// A valid object name, but the webhook wants Cluster names to be label values too.
		err := c.Create(ctx, clusterOn(ns, strings.Repeat("c", 64)))
		if !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), `admission webhook "validation.cluster.cluster.x-k8s.io" denied the request`) ||
			!strings.Contains(err.Error(), "must be a valid label value") {
			t.Fatalf("creating a Cluster with a 64-character name: %v, want the webhook's refusal", err)
		}
	})

	t.Run("mutating webhook defaults a Machine", func(t *testing.T) {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"}, Spec: clusterv1.MachineSpec{
			ClusterName: "c", Version: "1.36.0",
			Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachine", Name: "m"}}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if m.Spec.Version != "v1.36.0" || m.Labels[clusterv1.ClusterNameLabel] != "c" {
			t.Errorf("created Machine: version %q, labels %v; want v1.36.0 and %s=c from the defaulting webhook",
				m.Spec.Version, m.Labels, clusterv1.ClusterNameLabel)
		}
	})

	t.Run("manager reconciles a Cluster on an AnvilCluster", func(t *testing.T) {
		if err := c.Create(ctx, &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, clusterOn(ns, "c")); err != nil {
			t.Fatal(err)
		}
		// The owner reference shows the manager found the AnvilCluster's contract version
		// through its CRD's cluster.x-k8s.io/v1beta2 label, read it and patched it.
		eventually(t, "the Cluster's finalizer and its owner reference on the AnvilCluster", func(ctx context.Context) (bool, error) {
			cl := &clusterv1.Cluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, cl); err != nil {
				return false, err
			}
			ac := &infrav1.AnvilCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, ac); err != nil {
				return false, err
			}
			owned := false
			for _, o := range ac.OwnerReferences {
				owned = owned || (o.Kind == "Cluster" && o.Name == "c" && o.UID == cl.UID)
			}
			return owned && slices.Contains(cl.Finalizers, clusterv1.ClusterFinalizer), nil
		})
	})

	t.Run("conversion webhook serves v1beta1", func(t *testing.T) {
		old := &unstructured.Unstructured{}
		old.SetAPIVersion("cluster.x-k8s.io/v1beta1")
		old.SetKind("Cluster")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, old); err != nil {
			t.Fatal(err)
		}
		kind, _, _ := unstructured.NestedString(old.Object, "spec", "infrastructureRef", "kind")
		if old.GetAPIVersion() != "cluster.x-k8s.io/v1beta1" || kind != "AnvilCluster" {
			t.Errorf("Cluster read as v1beta1: apiVersion %s, infrastructureRef.kind %q", old.GetAPIVersion(), kind)
		}
	})

	t.Run("feature gates default off", func(t *testing.T) {
		err := c.Create(ctx, extensionConfig(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "can be set only if the RuntimeSDK feature flag is enabled") {
			t.Errorf("an ExtensionConfig without RuntimeSDK: %v, want the webhook's refusal naming the gate", err)
		}
	})

	pid, health := capi.PID(), capi.HealthAddr()
	if err := capi.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, pid, health)
	if err := capi.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// Feature gates reach the manager, and one control plane serves a second Start after Stop
// (the in-place test runs with InPlaceUpdates on and off).
func TestStartAgainWithOtherFeatureGates(t *testing.T) {
	ctx := context.Background()
	c := capiClient(t)
	ns := "gates"
	createNamespace(t, c, ns)
	for i, gates := range []map[string]bool{nil, {"InPlaceUpdates": true, "RuntimeSDK": true}} {
		started := time.Now()
		capi, err := Start(ctx, env.Config, Options{FeatureGates: gates})
		if err != nil {
			t.Fatalf("Start %d (%v): %v", i+1, gates, err)
		}
		t.Logf("Start %d took %s", i+1, time.Since(started).Round(time.Millisecond))
		err = c.Create(ctx, extensionConfig(), client.DryRunAll)
		switch {
		case gates["RuntimeSDK"] && err != nil:
			t.Errorf("with %v, an ExtensionConfig was refused: %v", gates, err)
		case !gates["RuntimeSDK"] && err == nil:
			t.Errorf("with %v, an ExtensionConfig was accepted: the webhook does not run with the default gates", gates)
		}
		// The new manager's webhooks answer for Cluster API's kinds, and it reconciles.
		name := fmt.Sprintf("c%d", i+1)
		if err := c.Create(ctx, clusterOn(ns, name)); err != nil {
			t.Fatalf("Start %d: creating a Cluster: %v", i+1, err)
		}
		eventually(t, "the Cluster's finalizer", func(ctx context.Context) (bool, error) {
			cl := &clusterv1.Cluster{}
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl)
			return err == nil && slices.Contains(cl.Finalizers, clusterv1.ClusterFinalizer), err
		})
		pid, health, dir := capi.PID(), capi.HealthAddr(), filepath.Dir(capi.LogPath())
		if err := capi.Stop(); err != nil {
			t.Fatalf("Stop %d: %v", i+1, err)
		}
		assertGone(t, pid, health)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the folder Start made (%s) is still there after Stop: %v", dir, err)
		}
	}
}

func extensionConfig() *runtimev1.ExtensionConfig {
	return &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{URL: "https://127.0.0.1:1"}}}
}

// assertGone checks that the process pid no longer exists and nothing answers on health.
func assertGone(t *testing.T, pid int, health string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Stop, signal 0 to capi-manager (pid %d): %v, want ESRCH (no such process)", pid, err)
	}
	if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + health + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("after Stop, %s still answers", health)
	}
}
