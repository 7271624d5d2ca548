package dev_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/harness"
)

// What `anvil dev --capi` starts (dev.StartClusterAPI), against a real apiserver: the core
// manager and the kubeadm providers, each serving its own kinds' webhooks and conversions,
// labelled and recorded as clusterctl init would; anvil's provider provisioning an
// AnvilCluster the core manager handed it; Stop leaving no process behind.
func TestStartClusterAPIRunsCoreKubeadmAndAnvil(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env, err := harness.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	bin, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	started := time.Now()
	a, err := dev.StartClusterAPI(ctx, env.Config, c, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = a.Stop()
		}
	})
	t.Logf("StartClusterAPI took %s", time.Since(started).Round(time.Millisecond))

	// KubeadmControlPlane waits longer for emulated guests' etcd (its flags, read back
	// from its process: it started with them, so it took them).
	cpManager := a.Managers().Manager(clusterapi.KubeadmControlPlane.Name)
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cpManager.PID())); err != nil ||
		!strings.Contains(string(cmdline), "--etcd-call-timeout-duration=60s") || !strings.Contains(string(cmdline), "--etcd-dial-timeout-duration=30s") {
		t.Errorf("KubeadmControlPlane's command line %q (%v), want its etcd timeouts for emulated guests", strings.ReplaceAll(string(cmdline), "\x00", " "), err)
	}

	// In-place updates: the core manager and KubeadmControlPlane's both run with the gates
	// and present the client certificate the extension trusts; anvil's provider serves the
	// extension and the core manager discovered its three hooks through the ExtensionConfig.
	for _, name := range []string{clusterapi.Core.Name, clusterapi.KubeadmControlPlane.Name} {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", a.Managers().Manager(name).PID()))
		if args := strings.ReplaceAll(string(cmdline), "\x00", " "); err != nil || !strings.Contains(args, "--feature-gates InPlaceUpdates=true,RuntimeSDK=true") ||
			!strings.Contains(args, "--runtime-extension-client-cert-file ") || !strings.Contains(args, "--runtime-extension-client-key-file ") {
			t.Errorf("%s's command line %q (%v), want the in-place gates and the extension's client certificate", name, args, err)
		}
	}
	ec := &unstructured.Unstructured{}
	ec.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
	ec.SetKind("ExtensionConfig")
	var handlers []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		handlers = nil
		if err := c.Get(ctx, client.ObjectKey{Name: dev.ExtensionConfigName}, ec); err == nil {
			list, _, _ := unstructured.NestedSlice(ec.Object, "status", "handlers")
			for _, h := range list {
				name, _, _ := unstructured.NestedString(h.(map[string]any), "name")
				handlers = append(handlers, name)
			}
		}
		if len(handlers) == 3 || time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(handlers)
	if got := strings.Join(handlers, " "); got != "can-update-machine-set.anvil can-update-machine.anvil update-machine.anvil" {
		t.Errorf("the ExtensionConfig %s's discovered handlers %q, want anvil's three in-place hooks (status %v)", dev.ExtensionConfigName, got, ec.Object["status"])
	}

	// Each provider's CRDs convert through its own webhook server; its webhook
	// configurations carry clusterctl's prefix and call it.
	for _, tc := range []struct {
		crd      string
		provider clusterapi.Provider
		webhooks []string
	}{
		{"clusters.cluster.x-k8s.io", clusterapi.Core, []string{"capi-validating-webhook-configuration", "capi-mutating-webhook-configuration"}},
		{"kubeadmconfigs.bootstrap.cluster.x-k8s.io", clusterapi.KubeadmBootstrap,
			[]string{"capi-kubeadm-bootstrap-validating-webhook-configuration", "capi-kubeadm-bootstrap-mutating-webhook-configuration"}},
		{"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", clusterapi.KubeadmControlPlane,
			[]string{"capi-kubeadm-control-plane-validating-webhook-configuration", "capi-kubeadm-control-plane-mutating-webhook-configuration"}},
	} {
		m := a.Managers().Manager(tc.provider.Name)
		if m == nil {
			t.Fatalf("no running %s", tc.provider.Name)
		}
		at := "https://127.0.0.1:" + strconv.Itoa(m.WebhookPort()) + "/"
		crd := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: tc.crd}, crd); err != nil {
			t.Fatal(err)
		}
		if v, ok := crd.Labels[clusterapi.ClusterctlLabel]; !ok || v != "" || crd.Labels[clusterapi.ProviderLabel] != tc.provider.Name {
			t.Errorf("CRD %s labels %v, want %s= and %s=%s", tc.crd, crd.Labels, clusterapi.ClusterctlLabel, clusterapi.ProviderLabel, tc.provider.Name)
		}
		// The core manager finds a provider kind's contract version by this label.
		if tc.provider.Name != clusterapi.Core.Name && crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1beta2" {
			t.Errorf("CRD %s labels %v, want the contract label cluster.x-k8s.io/v1beta2=v1beta2", tc.crd, crd.Labels)
		}
		if conv := crd.Spec.Conversion; conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.URL == nil ||
			!strings.HasPrefix(*conv.Webhook.ClientConfig.URL, at) {
			t.Errorf("CRD %s converts through %+v, want %s's server at %s", tc.crd, conv, tc.provider.Name, at)
		}
		var urls []string
		validating := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: tc.webhooks[0]}, validating); err != nil {
			t.Fatal(err)
		}
		for _, w := range validating.Webhooks {
			urls = append(urls, *w.ClientConfig.URL)
		}
		mutating := &admissionv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: tc.webhooks[1]}, mutating); err != nil {
			t.Fatal(err)
		}
		for _, w := range mutating.Webhooks {
			urls = append(urls, *w.ClientConfig.URL)
		}
		for _, u := range urls {
			if !strings.HasPrefix(u, at) {
				t.Errorf("%s's webhook calls %s, want %s", tc.provider.Name, u, at)
			}
		}
		if len(urls) == 0 {
			t.Errorf("%s has no webhooks", tc.provider.Name)
		}
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "capi-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// KubeadmControlPlane's own validation answers (an even number of stacked etcd members).
	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"name": "even", "namespace": ns.Name},
		"spec": map[string]any{"replicas": int64(2), "version": "v1.36.3",
			"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
				"apiGroup": infrav1.GroupVersion.Group, "kind": "AnvilMachineTemplate", "name": "cp"}}}}}}
	if err := c.Create(ctx, kcp, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "even") {
		t.Errorf("a KubeadmControlPlane of 2 stacked etcd members: %v, want KubeadmControlPlane's webhook refusing an even number", err)
	}
	// The bootstrap provider converts its kinds: a KubeadmConfig written as v1beta2 reads as v1beta1.
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
		"metadata": map[string]any{"name": "cfg", "namespace": ns.Name},
		"spec":     map[string]any{"preKubeadmCommands": []any{"echo converted"}}}}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	old := &unstructured.Unstructured{}
	old.SetAPIVersion("bootstrap.cluster.x-k8s.io/v1beta1")
	old.SetKind("KubeadmConfig")
	if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), old); err != nil {
		t.Fatalf("reading a KubeadmConfig as v1beta1 (through the bootstrap provider's conversion): %v", err)
	}
	if cmds, _, _ := unstructured.NestedStringSlice(old.Object, "spec", "preKubeadmCommands"); len(cmds) != 1 || cmds[0] != "echo converted" {
		t.Errorf("v1beta1 KubeadmConfig spec %v", old.Object["spec"])
	}

	// The inventory clusterctl reads: the three of Cluster API and anvil's.
	providers := &unstructured.UnstructuredList{}
	providers.SetAPIVersion("clusterctl.cluster.x-k8s.io/v1alpha3")
	providers.SetKind("ProviderList")
	if err := c.List(ctx, providers, client.InNamespace(dev.CAPIInventoryNamespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range providers.Items {
		names = append(names, fmt.Sprintf("%s/%s", p.GetName(), p.Object["type"]))
	}
	if got := strings.Join(names, " "); got != "bootstrap-kubeadm/BootstrapProvider cluster-api/CoreProvider control-plane-kubeadm/ControlPlaneProvider infrastructure-anvil/InfrastructureProvider" {
		t.Errorf("inventory %s", got)
	}

	// anvil's provider works beside the core manager: a Cluster's AnvilCluster is provisioned.
	if err := c.Create(ctx, &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: infrav1.AnvilClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: "demo"}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cl := &clusterv1.Cluster{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "demo"}, cl)
		if err == nil && cl.Status.Initialization.InfrastructureProvisioned != nil && *cl.Status.Initialization.InfrastructureProvisioned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster's infrastructure is not provisioned after a minute: %v %+v", err, cl.Status.Initialization)
		}
		time.Sleep(200 * time.Millisecond)
	}

	type gone struct {
		name, health string
		pid          int
	}
	var procs []gone
	for _, m := range a.Managers().Managers() {
		procs = append(procs, gone{m.Provider.Binary, m.HealthAddr(), m.PID()})
	}
	if err := a.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	for _, p := range procs {
		if err := syscall.Kill(p.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("after Stop, signal 0 to %s (pid %d): %v, want ESRCH", p.name, p.pid, err)
		}
		if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + p.health + "/healthz"); err == nil {
			resp.Body.Close()
			t.Errorf("after Stop, %s still answers on %s", p.name, p.health)
		}
	}
	select {
	case <-a.Done():
	default:
		t.Error("anvil's provider still runs after Stop")
	}
}

// Without the kubeadm providers in the bin folder, anvil dev --capi refuses before starting
// anything, naming make tools.
func TestCheckClusterAPINamesMakeTools(t *testing.T) {
	err := dev.CheckClusterAPI(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `run "make tools"`) {
		t.Errorf("CheckClusterAPI of an empty folder: %v", err)
	}
}
