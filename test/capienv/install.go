package capienv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/manifest"
	"github.com/anvil-dev/anvil/test/harness"
)

const (
	// ClusterctlLabel marks the CRDs whose objects clusterctl move considers: clusterctl init
	// puts it on every provider's CRDs (anvil's carry it from their markers).
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"
	// ProviderLabel names the provider a component belongs to, as clusterctl init writes it.
	ProviderLabel = "cluster.x-k8s.io/provider"

	// AnvilProviderVersion is the version the inventory records for anvil's provider.
	// clusterctl move only compares it between the two clusters (the target's must be at
	// least the source's), so any fixed semantic version serves tests.
	AnvilProviderVersion = "v0.1.0"

	installTimeout = 30 * time.Second
)

// files are the pieces `make tools` puts into bin/: the manager and Cluster API's manifests.
type files struct {
	manager   string // bin/capi-manager
	version   string // bin/capi/VERSION: the cluster-api module version the manifests come from
	crds      string // bin/capi/crd: core/config/crd/bases
	webhooks  string // bin/capi/webhook: core/config/webhook/manifests.yaml
	inventory string // bin/capi/clusterctl-api.yaml: clusterctl's Provider CRD
}

// locate finds the pieces in binDir and names the fix when one is missing.
func locate(binDir string) (files, error) {
	f := files{
		manager:   filepath.Join(binDir, "capi-manager"),
		version:   filepath.Join(binDir, "capi", "VERSION"),
		crds:      filepath.Join(binDir, "capi", "crd"),
		webhooks:  filepath.Join(binDir, "capi", "webhook"),
		inventory: filepath.Join(binDir, "capi", "clusterctl-api.yaml"),
	}
	for _, p := range []string{f.manager, f.version, filepath.Join(f.crds, "cluster.x-k8s.io_clusters.yaml"),
		filepath.Join(f.webhooks, "manifests.yaml"), f.inventory} {
		if _, err := os.Stat(p); err != nil {
			return files{}, fmt.Errorf("%s is missing: run \"make tools\" (it builds bin/capi-manager and copies Cluster API's manifests into bin/capi; "+
				"with KUBEBUILDER_ASSETS set, they are read from there)", p)
		}
	}
	return f, nil
}

// capiVersion is the version of the cluster-api module bin/capi was copied from.
func (f files) capiVersion() (string, error) {
	raw, err := os.ReadFile(f.version)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(raw))
	if v == "" {
		return "", fmt.Errorf("%s is empty: run \"make tools\" again", f.version)
	}
	return v, nil
}

// installWebhooks creates Cluster API's webhook configurations, rewritten by envtest to call
// https://127.0.0.1:<free port>/<path> with a CA it makes; the serving certificate and key
// are written into the returned options' LocalServingCertDir for the manager.
func installWebhooks(cfg *rest.Config, f files) (envtest.WebhookInstallOptions, error) {
	o := envtest.WebhookInstallOptions{
		Paths:            []string{f.webhooks},
		LocalServingHost: "127.0.0.1",
		// Every CRD installed with these options converts through the manager's /convert.
		IgnoreSchemeConvertible: true,
		MaxTime:                 installTimeout,
		PollInterval:            100 * time.Millisecond,
	}
	if err := o.PrepWithoutInstalling(); err != nil {
		return o, fmt.Errorf("preparing Cluster API's webhooks: %w", err)
	}
	// The manifests' names are kustomize's bases; an install made by clusterctl prefixes
	// them with capi-, and so does this one, so they clash with nobody else's.
	for _, w := range o.MutatingWebhooks {
		w.Name = "capi-" + w.Name
	}
	for _, w := range o.ValidatingWebhooks {
		w.Name = "capi-" + w.Name
	}
	if err := o.Install(cfg); err != nil {
		_ = o.Cleanup()
		return o, fmt.Errorf("installing Cluster API's webhook configurations: %w", err)
	}
	return o, nil
}

// installCRDs installs Cluster API's CRDs, converting through the webhooks of wh and
// labelled as clusterctl init labels them, then clusterctl's inventory CRD. They are
// separate envtest installs because envtest points every CRD of an install with
// IgnoreSchemeConvertible at the conversion webhook: anvil's CRDs must stay out of it.
func installCRDs(cfg *rest.Config, f files, wh envtest.WebhookInstallOptions) error {
	capi := envtest.CRDInstallOptions{Paths: []string{f.crds}, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&capi); err != nil {
		return fmt.Errorf("reading Cluster API's CRDs from %s: %w", f.crds, err)
	}
	for _, c := range capi.CRDs {
		labels := c.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ClusterctlLabel] = ""
		labels[ProviderLabel] = "cluster-api"
		c.SetLabels(labels)
	}
	capi.Paths = nil // read above; InstallCRDs would read them again, unlabelled
	capi.WebhookOptions = wh
	capi.MaxTime, capi.PollInterval = installTimeout, 100*time.Millisecond
	if _, err := envtest.InstallCRDs(cfg, capi); err != nil {
		return fmt.Errorf("installing Cluster API's CRDs: %w", err)
	}
	inventory := envtest.CRDInstallOptions{Paths: []string{f.inventory}, ErrorIfPathMissing: true,
		MaxTime: installTimeout, PollInterval: 100 * time.Millisecond}
	if _, err := envtest.InstallCRDs(cfg, inventory); err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD: %w", err)
	}
	return nil
}

// installAnvilProvider installs anvil's provider CRDs (config/crd/capi) and the shipped
// ClusterRole that aggregates anvil's kinds into Cluster API's manager role (config/rbac/capi).
func installAnvilProvider(ctx context.Context, c client.Client) error {
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

// InstallInventory records in namespace, as clusterctl init would, the providers of an
// anvil management cluster: cluster-api (CoreProvider, the version bin/capi was copied
// from) and infrastructure-anvil (InfrastructureProvider, AnvilProviderVersion).
// clusterctl move refuses to run unless the target cluster lists every provider of the
// source, so a move test calls it on both clusters. It creates namespace if missing and
// replaces Provider objects already there.
func InstallInventory(ctx context.Context, c client.Client, namespace string) error {
	binDir, err := harness.AssetsDir()
	if err != nil {
		return err
	}
	f, err := locate(binDir)
	if err != nil {
		return err
	}
	capiVersion, err := f.capiVersion()
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	for _, p := range []struct{ name, providerName, typ, version string }{
		{"cluster-api", "cluster-api", "CoreProvider", capiVersion},
		{"infrastructure-anvil", "anvil", "InfrastructureProvider", AnvilProviderVersion},
	} {
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

// Client is a client of cfg that knows anvil's kinds and Cluster API's, its runtime kinds
// (ExtensionConfig) included: anvil's scheme has only Cluster API's core kinds.
func Client(cfg *rest.Config) (client.Client, error) {
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := runtimev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
