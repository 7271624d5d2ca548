package clusterapi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/manifest"
)

const (
	// ClusterctlLabel marks the CRDs whose objects clusterctl move considers: clusterctl init
	// puts it on every provider's CRDs (anvil's carry it from their markers).
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"
	// ProviderLabel names the provider a component belongs to, as clusterctl init writes it.
	ProviderLabel = "cluster.x-k8s.io/provider"

	// AnvilProviderVersion is the version the inventory records for anvil's provider.
	// clusterctl move only compares it between the two clusters (the target's must be at
	// least the source's), so any fixed semantic version serves.
	AnvilProviderVersion = "v0.1.0"

	installTimeout = 30 * time.Second
)

// installWebhooks creates p's webhook configurations, renamed with p's prefix and rewritten
// by envtest to call https://127.0.0.1:<free port>/<path> with a CA it makes; the serving
// certificate and key are written into the returned options' LocalServingCertDir.
func installWebhooks(cfg *rest.Config, p Provider, f files) (envtest.WebhookInstallOptions, error) {
	o := envtest.WebhookInstallOptions{
		Paths:            []string{f.webhooks},
		LocalServingHost: "127.0.0.1",
		// Every CRD installed with these options converts through this provider's /convert.
		IgnoreSchemeConvertible: true,
		MaxTime:                 installTimeout,
		PollInterval:            100 * time.Millisecond,
	}
	if err := o.PrepWithoutInstalling(); err != nil {
		return o, fmt.Errorf("preparing the webhooks of %s: %w", p.Name, err)
	}
	for _, w := range o.MutatingWebhooks {
		w.Name = p.WebhookPrefix + w.Name
	}
	for _, w := range o.ValidatingWebhooks {
		w.Name = p.WebhookPrefix + w.Name
	}
	if err := o.Install(cfg); err != nil {
		_ = o.Cleanup()
		return o, fmt.Errorf("installing the webhook configurations of %s: %w", p.Name, err)
	}
	return o, nil
}

// installCRDs installs p's CRDs, converting through the webhooks of wh and labelled as
// clusterctl init labels them (with the labels of the provider's own kustomization). Each provider is an envtest install of its own because envtest
// points every CRD of an install with IgnoreSchemeConvertible at that install's webhook.
func installCRDs(cfg *rest.Config, p Provider, f files, wh envtest.WebhookInstallOptions) error {
	o := envtest.CRDInstallOptions{Paths: []string{f.crds}, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&o); err != nil {
		return fmt.Errorf("reading the CRDs of %s from %s: %w", p.Name, f.crds, err)
	}
	for _, c := range o.CRDs {
		labels := c.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range p.CRDLabels {
			labels[k] = v
		}
		labels[ClusterctlLabel] = ""
		labels[ProviderLabel] = p.Name
		c.SetLabels(labels)
	}
	o.Paths = nil // read above; InstallCRDs would read them again, unlabelled
	o.WebhookOptions = wh
	o.MaxTime, o.PollInterval = installTimeout, 100*time.Millisecond
	if _, err := envtest.InstallCRDs(cfg, o); err != nil {
		return fmt.Errorf("installing the CRDs of %s: %w", p.Name, err)
	}
	return nil
}

// installInventoryCRD installs clusterctl's Provider CRD.
func installInventoryCRD(cfg *rest.Config, fs fileSet) error {
	o := envtest.CRDInstallOptions{Paths: []string{fs.inventory}, ErrorIfPathMissing: true,
		MaxTime: installTimeout, PollInterval: 100 * time.Millisecond}
	if _, err := envtest.InstallCRDs(cfg, o); err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD: %w", err)
	}
	return nil
}

// InstallAnvilProvider installs anvil's provider CRDs (config/crd/capi) and the shipped
// ClusterRole that aggregates anvil's kinds into Cluster API's manager role (config/rbac/capi).
func InstallAnvilProvider(ctx context.Context, c client.Client) error {
	if err := crd.InstallClusterAPIProvider(ctx, c); err != nil {
		return fmt.Errorf("installing anvil's Cluster API provider CRDs: %w", err)
	}
	roles, err := rbac.Load("capi")
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := manifest.Apply(ctx, c, r); err != nil {
			return fmt.Errorf("installing %s %s: %w", r.GetKind(), r.GetName(), err)
		}
	}
	return nil
}

// InstallInventory records in namespace, as clusterctl init would, providers (at the
// version bin/capi in binDir was copied from) and anvil's, infrastructure-anvil
// (AnvilProviderVersion). clusterctl move refuses to run unless the target cluster lists
// every provider of the source. It creates namespace if missing and replaces Provider
// objects already there.
func InstallInventory(ctx context.Context, c client.Client, binDir, namespace string, providers []Provider) error {
	capiVersion, err := Version(binDir)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	type entry struct{ name, providerName, typ, version string }
	var entries []entry
	for _, p := range providers {
		entries = append(entries, entry{p.Name, p.ProviderName, p.Type, capiVersion})
	}
	entries = append(entries, entry{"infrastructure-anvil", "anvil", "InfrastructureProvider", AnvilProviderVersion})
	for _, p := range entries {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion":   "clusterctl.cluster.x-k8s.io/v1alpha3",
			"kind":         "Provider",
			"providerName": p.providerName,
			"type":         p.typ,
			"version":      p.version,
		}}
		u.SetNamespace(namespace)
		u.SetName(p.name)
		u.SetLabels(map[string]string{ClusterctlLabel: "", ProviderLabel: p.name,
			"clusterctl.cluster.x-k8s.io/core": "inventory"})
		if err := manifest.Apply(ctx, c, u); err != nil {
			return fmt.Errorf("recording provider %s in namespace %s: %w", p.name, namespace, err)
		}
	}
	return nil
}
