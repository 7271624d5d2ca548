package capienv

import (
	"context"

	"k8s.io/client-go/rest"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/test/harness"
)

const (
	// ClusterctlLabel marks the CRDs whose objects clusterctl move considers.
	ClusterctlLabel = clusterapi.ClusterctlLabel
	// ProviderLabel names the provider a component belongs to, as clusterctl init writes it.
	ProviderLabel = clusterapi.ProviderLabel
	// AnvilProviderVersion is the version the inventory records for anvil's provider.
	AnvilProviderVersion = clusterapi.AnvilProviderVersion
)

// InstallInventory records in namespace, as clusterctl init would, the providers of an
// anvil management cluster: cluster-api (CoreProvider, the version bin/capi was copied
// from) and infrastructure-anvil (InfrastructureProvider, AnvilProviderVersion).
// clusterctl move refuses to run unless the target cluster lists every provider of the
// source, so a move test calls it on both clusters. It creates namespace if missing and
// replaces Provider objects already there.
func InstallInventory(ctx context.Context, c client.Client, namespace string) error {
	return installInventory(ctx, c, namespace, clusterapi.CoreOnly)
}

func installInventory(ctx context.Context, c client.Client, namespace string, providers []clusterapi.Provider) error {
	binDir, err := harness.AssetsDir()
	if err != nil {
		return err
	}
	return clusterapi.InstallInventory(ctx, c, binDir, namespace, providers)
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
