package clusterapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

	// installTimeout bounds the install of one provider's CRDs, until each is Established.
	installTimeout = 30 * time.Second
)

// installCRDs installs p's CRDs, labelled as clusterctl init labels them (with the labels of
// the provider's own kustomization), each converting through s's /convert.
func installCRDs(ctx context.Context, c client.Client, p Provider, f files, s webhookServer) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	crds, err := readCRDs(f.crds, "*.yaml")
	if err != nil {
		return fmt.Errorf("reading the CRDs of %s: %w", p.Name, err)
	}
	for _, def := range crds {
		labelCRD(def, p)
		convertThrough(def, s)
	}
	if err := crd.Apply(ctx, c, crds); err != nil {
		return fmt.Errorf("installing the CRDs of %s: %w", p.Name, err)
	}
	return nil
}

// labelCRD adds clusterctl's labels and p's own.
func labelCRD(def *apiextv1.CustomResourceDefinition, p Provider) {
	if def.Labels == nil {
		def.Labels = map[string]string{}
	}
	for k, v := range p.CRDLabels {
		def.Labels[k] = v
	}
	def.Labels[ClusterctlLabel] = ""
	def.Labels[ProviderLabel] = p.Name
}

// convertThrough makes the apiserver convert def's versions by calling s's /convert, as
// clusterctl init's CRDs call the provider's Service (every CRD of a Cluster API provider is
// served by that provider's conversion webhook). A CRD that preserves unknown fields cannot
// convert by webhook and is left as it is.
func convertThrough(def *apiextv1.CustomResourceDefinition, s webhookServer) {
	if def.Spec.PreserveUnknownFields {
		return
	}
	url := s.url("/convert")
	def.Spec.Conversion = &apiextv1.CustomResourceConversion{
		Strategy: apiextv1.WebhookConverter,
		Webhook: &apiextv1.WebhookConversion{
			ClientConfig:             &apiextv1.WebhookClientConfig{URL: &url, CABundle: s.caPEM},
			ConversionReviewVersions: []string{"v1", "v1beta1"},
		},
	}
}

// installInventoryCRD installs clusterctl's Provider CRD.
func installInventoryCRD(ctx context.Context, c client.Client, fs fileSet) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	crds, err := readCRDs(filepath.Dir(fs.inventory), filepath.Base(fs.inventory))
	if err == nil {
		err = crd.Apply(ctx, c, crds)
	}
	if err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD: %w", err)
	}
	return nil
}

// readCRDs reads the CRDs of the files in dir that match pattern; finding none is an error.
func readCRDs(dir, pattern string) ([]*apiextv1.CustomResourceDefinition, error) {
	crds, err := crd.Read(os.DirFS(dir), pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRD in %s: run \"make tools\" again", filepath.Join(dir, pattern))
	}
	return crds, nil
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
