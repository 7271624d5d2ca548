// Package metalpool runs one bare-metal pool in the calling process, as `anvil runtime
// metal` and `anvil poollet` run it in a site: the pool (supervised Ironic, the Host
// controller, the metal runtime) served over a real MRI socket, and the pool's poollet.
// Tests and scenarios use it; it is not part of anvil. Rig is what the bare-metal test
// packages share around it (sites, pools, the manager, waits and checks on Hosts).
package metalpool

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
)

// Running is a started pool with its MRI server and poollet.
type Running struct {
	*pool.Pool
	// SiteUser and PoolletUser are the identities the site (Host controller, runtime) and
	// the poollet run as: their own ServiceAccounts with the shipped roles.
	SiteUser, PoolletUser string
	cancel                context.CancelFunc
	done                  []chan error
	conn                  interface{ Close() error }
}

// Start starts the pool cfg describes (its MRI socket in cfg.Site.StateDir) and its
// poollet, which checks the runtime every interval and reads image tags as the pool's
// cache does (cfg.ImageCache.Network). Each runs as its own ServiceAccount with the
// shipped roles, impersonated from rc and cfg.Site.RestConfig: c (an admin's) installs
// them, as an operator adding a site would.
func Start(ctx context.Context, rc *rest.Config, c client.Client, cfg pool.Config, interval time.Duration) (*Running, error) {
	site, err := rbac.InstallMetal(ctx, c, cfg.Site.Namespace)
	if err != nil {
		return nil, err
	}
	poolletID, err := rbac.InstallPoollet(ctx, c, cfg.Name)
	if err != nil {
		return nil, err
	}
	cfg.Site.RestConfig = rest.CopyConfig(cfg.Site.RestConfig)
	cfg.Site.RestConfig.Impersonate = site
	rc = rest.CopyConfig(rc)
	rc.Impersonate = poolletID
	p, err := pool.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r := &Running{Pool: p, SiteUser: site.UserName, PoolletUser: poolletID.UserName}
	endpoint := "unix://" + filepath.Join(cfg.Site.StateDir, "mri.sock")
	l, err := mri.Listen(endpoint)
	if err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	rt, conn, err := mri.Dial(endpoint, mri.Pool(cfg.Name))
	if err != nil {
		return nil, errors.Join(err, l.Close(), p.Stop())
	}
	r.conn = conn
	o := poollet.DefaultOptions(cfg.Name)
	o.Runtime, o.ProviderID, o.SkipControllerNameValidation = rt, "metal://"+cfg.Name, true
	o.Interval, o.StuckAfter = interval, 5*time.Second
	o.Images = poollet.NewRegistryImages(cfg.ImageCache.Network)
	o.ImageFolders = imageowner.FoldersFor(cfg.ImageCache.Network.Logins, nil)
	mgr, err := poollet.New(rc, o)
	if err != nil {
		return nil, errors.Join(err, conn.Close(), l.Close(), p.Stop())
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.run(runCtx, func(ctx context.Context) error { return mri.ServeListener(ctx, l, p.Runtime, mri.Pool(cfg.Name)) })
	r.run(runCtx, mgr.Start)
	return r, nil
}

func (r *Running) run(ctx context.Context, f func(context.Context) error) {
	done := make(chan error, 1)
	r.done = append(r.done, done)
	go func() {
		err := f(ctx)
		if ctx.Err() != nil {
			err = nil // stopping
		}
		done <- err
	}()
}

// Stop stops the poollet, the MRI server and the pool, and returns what failed.
func (r *Running) Stop() error {
	r.cancel()
	var err error
	for _, d := range r.done {
		err = errors.Join(err, <-d)
	}
	return errors.Join(err, r.conn.Close(), r.Pool.Stop())
}
