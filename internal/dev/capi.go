package dev

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/capiprovider"
	"github.com/anvil-dev/anvil/internal/clusterapi"
)

// CAPINamespace holds anvil's provider's identity (as config/capi's) and clusterctl's
// inventory, as clusterctl init's capi-system would.
const (
	CAPINamespace          = "anvil-system"
	CAPIInventoryNamespace = "capi-system"
)

// ClusterAPI is Cluster API running beside anvil dev: the core manager and the kubeadm
// providers as child processes, anvil's provider in this process.
type ClusterAPI struct {
	managers *clusterapi.Managers
	done     chan struct{}
	err      error // anvil's provider's, valid once done is closed
	cancel   context.CancelFunc
	version  string
	// extension is where anvil's provider serves the in-place update extension.
	extension string
}

// CheckClusterAPI says what `make tools` must build before StartClusterAPI can run from
// binDir, so anvil dev refuses before it starts anything.
func CheckClusterAPI(binDir string) error {
	return clusterapi.Check(binDir, clusterapi.WithKubeadm)
}

// emulatedEtcdTimeouts are KubeadmControlPlane's waits for the workload clusters' etcd
// (through their API servers), longer than its defaults (10 s to dial, 15 s a call): anvil
// dev's guests are emulated (TCG), and KubeadmControlPlane read "Failed to get etcd members
// … context deadline exceeded" of a healthy emulated control plane, so the Cluster was never
// Available (session 27's QuickStart run, docs/capi.md).
var emulatedEtcdTimeouts = []string{"--etcd-dial-timeout-duration=30s", "--etcd-call-timeout-duration=60s"}

// emulatedEndpointGrace is how long anvil dev's provider lets a control-plane machine run
// before an endpoint accepting nothing is called unreachable.
const emulatedEndpointGrace = 30 * time.Minute

// KubeadmControlPlaneArgs are the flags anvil dev gives KubeadmControlPlane's manager: a
// second management cluster of the same guests (a pivot's) wants them too.
func KubeadmControlPlaneArgs() []string { return slices.Clone(emulatedEtcdTimeouts) }

// StartClusterAPI installs Cluster API (core, kubeadm bootstrap, KubeadmControlPlane: their
// CRDs, webhooks and clusterctl's inventory, as clusterctl init would) and anvil's provider
// into the apiserver of cfg, runs Cluster API's managers from binDir with their logs in
// dir, and anvil's provider (internal/capiprovider) in this process under its own
// ServiceAccount, as config/capi runs it. In-place updates are on: the managers run with
// clusterapi.InPlaceGates and a client certificate (in dir/in-place), anvil's provider
// serves the update extension on loopback, and ExtensionConfig ExtensionConfigName
// registers it. Stop ends them all; so does ctx.
func StartClusterAPI(ctx context.Context, cfg *rest.Config, c client.Client, binDir, dir string) (*ClusterAPI, error) {
	version, err := clusterapi.Version(binDir)
	if err != nil {
		return nil, err
	}
	if err := clusterapi.InstallAnvilProvider(ctx, c); err != nil {
		return nil, err
	}
	inPlace, err := prepareInPlace(dir)
	if err != nil {
		return nil, err
	}
	m, err := clusterapi.Start(ctx, cfg, clusterapi.Options{BinDir: binDir, Providers: clusterapi.WithKubeadm, Dir: dir,
		FeatureGates: clusterapi.InPlaceGates(), Args: inPlace.managerArgs,
		ControlPlaneArgs: append(slices.Clone(emulatedEtcdTimeouts), inPlace.managerArgs...)})
	if err != nil {
		return nil, err
	}
	a := &ClusterAPI{managers: m, version: version, done: make(chan struct{}), extension: inPlace.extension.BindAddress}
	fail := func(err error) (*ClusterAPI, error) {
		_ = m.Stop()
		return nil, err
	}
	if err := clusterapi.InstallInventory(ctx, c, binDir, CAPIInventoryNamespace, clusterapi.WithKubeadm); err != nil {
		return fail(err)
	}
	identity, err := rbac.InstallCAPIProvider(ctx, c, CAPINamespace)
	if err != nil {
		return fail(err)
	}
	o := capiprovider.DefaultOptions()
	// As the dev manager's: nothing to scrape, fewer ports to clash.
	o.MetricsAddr, o.HealthAddr = "0", "0"
	// Every control plane of a dev machine listens on loopback, this one too: an identityRef
	// kubeconfig for it (a cluster named for a pivot from the start, docs/capi.md) names a
	// loopback server.
	o.AllowLoopback = true
	o.Extension = inPlace.extension
	// anvil dev's guests are emulated: a kubeadm API server there answers 10 to 20 minutes
	// after its machine starts (docs/kubeadm.md), not within the default grace.
	o.ControlPlaneEndpointGrace = emulatedEndpointGrace
	providerCfg := rest.CopyConfig(cfg)
	providerCfg.Impersonate = identity
	provider, err := capiprovider.New(providerCfg, o)
	if err != nil {
		return fail(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	go func() {
		a.err = provider.Start(pctx)
		close(a.done)
	}()
	if err := inPlace.register(ctx, cfg); err != nil {
		_ = a.Stop()
		return nil, err
	}
	return a, nil
}

// Done is closed when anvil's provider has ended (Err says why).
func (a *ClusterAPI) Done() <-chan struct{} { return a.done }

// Err is the error anvil's provider ended with, once Done is closed.
func (a *ClusterAPI) Err() error { return a.err }

// Stop ends anvil's provider, then Cluster API's managers (by their PIDs), and reports
// either's error.
func (a *ClusterAPI) Stop() error {
	a.cancel()
	<-a.done
	return errors.Join(a.err, a.managers.Stop())
}

// Managers are Cluster API's running managers.
func (a *ClusterAPI) Managers() *clusterapi.Managers { return a.managers }

// Summary is the banner's line: each manager's pid and the logs' folder.
func (a *ClusterAPI) Summary() string {
	var parts []string
	for _, m := range a.managers.Managers() {
		parts = append(parts, fmt.Sprintf("%s pid %d", m.Provider.Binary, m.PID()))
	}
	return fmt.Sprintf("%s: %s; anvil's provider in this process, its in-place update extension at https://%s (logs in %s)",
		a.version, strings.Join(parts, ", "), a.extension, filepath.Clean(a.managers.Dir()))
}
