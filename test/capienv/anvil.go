package capienv

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/capiprovider"
	"github.com/anvil-dev/anvil/internal/manager"
)

// RunAnvilManager runs anvil's manager and, beside it, its Cluster API provider against
// the apiserver of cfg until stop is called (before that apiserver stops); an error either
// ends with is printed. The provider runs as config/capi runs it: under its own
// ServiceAccount (rbac.InstallCAPIProvider, impersonated), so a right its role lacks fails
// here as it would in a cluster. With ext's address set it serves the in-place update
// extension there. The manager takes any architecture for an image (the runtime refuses a
// wrong one), so a test needs no registry allow-list.
func RunAnvilManager(ctx context.Context, cfg *rest.Config, ext extension.Options) (stop func(), err error) {
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	o.ImageArchitectures = manager.ImageArchitecturesAny
	mgr, err := manager.New(rest.CopyConfig(cfg), o)
	if err != nil {
		return nil, err
	}
	c, err := Client(cfg)
	if err != nil {
		return nil, err
	}
	identity, err := rbac.InstallCAPIProvider(ctx, c, ProviderNamespace)
	if err != nil {
		return nil, err
	}
	po := capiprovider.DefaultOptions()
	po.MetricsAddr, po.HealthAddr, po.SkipControllerNameValidation = "0", "0", true
	po.Extension = ext
	// The tests' endpoints answer at once or never: unreachable at the first refused dial.
	po.ControlPlaneEndpointGrace = 0
	// The identities of the pivot tests name the other control plane at 127.0.0.1.
	po.AllowLoopback = true
	providerCfg := rest.CopyConfig(cfg)
	providerCfg.Impersonate = identity
	provider, err := capiprovider.New(providerCfg, po)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- mgr.Start(mctx) }()
	go func() { done <- provider.Start(mctx) }()
	return func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "anvil manager or Cluster API provider:", err)
			}
		}
	}, nil
}

// ProviderNamespace is where the tests' Cluster API provider has its ServiceAccount, as
// config/capi's has.
const ProviderNamespace = "anvil-system"

// ReportPoolErrors prints, while ctx lives, the errors of a pool started with internal/dev
// (StartFakePool, StartQemuPool), and returns a function that waits until the pool has
// stopped (its error channel closed): call it after ctx ends.
func ReportPoolErrors(ctx context.Context, pool string, errs <-chan error) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for err := range errs {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "pool %s: %v\n", pool, err)
			}
		}
	}()
	return func() { <-done }
}
