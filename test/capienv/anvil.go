package capienv

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/manager"
)

// RunAnvilManager runs anvil's manager with the Cluster API provider against the apiserver
// of cfg until stop is called (before that apiserver stops); an error it ends with is
// printed; with ext's address set it serves the in-place update extension there. It takes any architecture for an image (the runtime refuses a wrong one), so a
// test needs no registry allow-list.
func RunAnvilManager(ctx context.Context, cfg *rest.Config, ext extension.Options) (stop func(), err error) {
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	o.ImageArchitectures = manager.ImageArchitecturesAny
	o.ClusterAPI, o.CAPIExtension = true, ext
	// The identities of the pivot tests name the other control plane at 127.0.0.1.
	o.CAPIIdentityAllowLoopback = true
	mgr, err := manager.New(rest.CopyConfig(cfg), o)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "anvil manager:", err)
		}
	}, nil
}

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
