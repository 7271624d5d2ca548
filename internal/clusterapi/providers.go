package clusterapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Provider is one of Cluster API's managers, as clusterctl knows it.
type Provider struct {
	// Name is clusterctl's name (the cluster.x-k8s.io/provider label, the inventory's
	// Provider name) and the folder of its manifests in bin/capi.
	Name string
	// ProviderName and Type are the inventory's providerName and type.
	ProviderName, Type string
	// Binary is the manager's file in the bin folder.
	Binary string
	// WebhookPrefix is the prefix clusterctl's install (the provider's kustomization) gives
	// its webhook configurations' names, so that the providers' configurations clash with
	// nobody's.
	WebhookPrefix string
	// CRDLabels are the labels the provider's kustomization puts on its CRDs beyond
	// clusterctl's: a bootstrap or control-plane provider's contract versions, which the core
	// manager reads to know which version of the kind to use (without them it cannot read a
	// KubeadmControlPlane at all).
	CRDLabels map[string]string
}

// contractLabels are the contract labels of Cluster API's own kubeadm providers' CRDs.
var contractLabels = map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}

// The providers `make tools` builds, all from one Cluster API release.
var (
	Core = Provider{Name: "cluster-api", ProviderName: "cluster-api", Type: "CoreProvider",
		Binary: "capi-manager", WebhookPrefix: "capi-"}
	KubeadmBootstrap = Provider{Name: "bootstrap-kubeadm", ProviderName: "kubeadm", Type: "BootstrapProvider",
		Binary: "capi-kubeadm-bootstrap", WebhookPrefix: "capi-kubeadm-bootstrap-", CRDLabels: contractLabels}
	KubeadmControlPlane = Provider{Name: "control-plane-kubeadm", ProviderName: "kubeadm", Type: "ControlPlaneProvider",
		Binary: "capi-kubeadm-control-plane", WebhookPrefix: "capi-kubeadm-control-plane-", CRDLabels: contractLabels}
)

// CoreOnly and WithKubeadm are the sets of providers Start is given.
var (
	CoreOnly    = []Provider{Core}
	WithKubeadm = []Provider{Core, KubeadmBootstrap, KubeadmControlPlane}
)

// files are the pieces of a provider `make tools` puts into the bin folder.
type files struct {
	binary   string // bin/<binary>
	crds     string // bin/capi/<name>/crd
	webhooks string // bin/capi/<name>/webhook
}

// fileSet is every piece Start needs for its providers.
type fileSet struct {
	version   string // bin/capi/VERSION: the cluster-api module version the manifests come from
	inventory string // bin/capi/clusterctl-api.yaml: clusterctl's Provider CRD
	providers []files
}

// locate finds the pieces of providers in binDir and names the fix when one is missing.
func locate(binDir string, providers []Provider) (fileSet, error) {
	fs := fileSet{
		version:   filepath.Join(binDir, "capi", "VERSION"),
		inventory: filepath.Join(binDir, "capi", "clusterctl-api.yaml"),
	}
	var need []string
	for _, p := range providers {
		f := files{
			binary:   filepath.Join(binDir, p.Binary),
			crds:     filepath.Join(binDir, "capi", p.Name, "crd"),
			webhooks: filepath.Join(binDir, "capi", p.Name, "webhook"),
		}
		fs.providers = append(fs.providers, f)
		need = append(need, f.binary, filepath.Join(f.webhooks, "manifests.yaml"), f.crds)
	}
	need = append(need, fs.version, fs.inventory)
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return fileSet{}, fmt.Errorf("%s is missing: run \"make tools\" (it builds Cluster API's managers into bin/ and copies their manifests into bin/capi)", p)
		}
	}
	return fs, nil
}

// Version is the version of the cluster-api module the manifests in binDir were copied from.
func Version(binDir string) (string, error) {
	path := filepath.Join(binDir, "capi", "VERSION")
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: run \"make tools\"", err)
	}
	v := strings.TrimSpace(string(raw))
	if v == "" {
		return "", fmt.Errorf("%s is empty: run \"make tools\" again", path)
	}
	return v, nil
}

// Check says which piece of providers `make tools` has not put into binDir yet, if any.
func Check(binDir string, providers []Provider) error {
	_, err := locate(binDir, providers)
	return err
}
