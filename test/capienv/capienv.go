package capienv

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/test/harness"
)

// Options say how to run Cluster API's managers.
type Options struct {
	// Kubeadm runs Cluster API's kubeadm bootstrap provider and KubeadmControlPlane beside
	// the core manager. Off by default: only tests that make KubeadmConfigs or
	// KubeadmControlPlanes need them, and each is a process (and a start) more.
	Kubeadm bool
	// FeatureGates are passed as --feature-gates to every manager (e.g. InPlaceUpdates and
	// RuntimeSDK, which in-place updates need together). Empty: Cluster API's defaults.
	FeatureGates map[string]bool
	// Args are more flags for the core manager (e.g. --runtime-extension-client-cert-file).
	Args []string
	// ControlPlaneArgs are more flags for KubeadmControlPlane's manager (with Kubeadm).
	ControlPlaneArgs []string
	// Dir holds the managers' logs, kubeconfig and nothing else. Empty: a temporary
	// folder that Stop removes.
	Dir string
	// ReadyTimeout bounds the wait for the managers to be ready; default 2 minutes.
	ReadyTimeout time.Duration
}

// providers are the Cluster API providers the options run.
func (o Options) providers() []clusterapi.Provider {
	if o.Kubeadm {
		return clusterapi.WithKubeadm
	}
	return clusterapi.CoreOnly
}

// CAPI is Cluster API's running managers (internal/clusterapi) and what they serve.
type CAPI struct {
	*clusterapi.Managers
	core *clusterapi.Manager
}

// Start installs Cluster API into the apiserver of cfg (its CRDs labelled for clusterctl,
// each provider's converting through that provider; their webhook configurations;
// clusterctl's inventory CRD) and anvil's provider (its CRDs and the ClusterRole for Cluster
// API's manager), then runs bin/capi-manager (and, with Options.Kubeadm,
// bin/capi-kubeadm-bootstrap and bin/capi-kubeadm-control-plane) against it and waits until
// their health endpoints and webhooks answer. Start again after Stop (on the same or
// another apiserver) to change feature gates: each Start installs anew, with new ports and
// certificates.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*CAPI, error) {
	binDir, err := harness.AssetsDir()
	if err != nil {
		return nil, err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := clusterapi.InstallAnvilProvider(ctx, cl); err != nil {
		return nil, err
	}
	m, err := clusterapi.Start(ctx, cfg, clusterapi.Options{BinDir: binDir, Providers: opts.providers(),
		FeatureGates: opts.FeatureGates, Args: opts.Args, ControlPlaneArgs: opts.ControlPlaneArgs,
		Dir: opts.Dir, ReadyTimeout: opts.ReadyTimeout})
	if err != nil {
		return nil, err
	}
	return &CAPI{Managers: m, core: m.Manager(clusterapi.Core.Name)}, nil
}

// PID is the core manager process's id.
func (c *CAPI) PID() int { return c.core.PID() }

// LogPath is the core manager's log file (gone after Stop when Start made the folder).
func (c *CAPI) LogPath() string { return c.core.LogPath() }

// HealthAddr is the core manager's health endpoint (/healthz, /readyz), on 127.0.0.1.
func (c *CAPI) HealthAddr() string { return c.core.HealthAddr() }

// WebhookPort is the port of the core manager's webhook server, which the apiserver calls
// on 127.0.0.1.
func (c *CAPI) WebhookPort() int { return c.core.WebhookPort() }
