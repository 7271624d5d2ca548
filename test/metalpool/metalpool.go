// Package metalpool runs one bare-metal pool in the calling process, as `anvil runtime
// metal` and `anvil poollet` run it in a site: the pool (supervised Ironic, the Host
// controller, the metal runtime) served over a real MRI socket, and the pool's poollet.
// Tests and scenarios use it; it is not part of anvil.
package metalpool

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
)

// Running is a started pool with its MRI server and poollet.
type Running struct {
	*pool.Pool
	cancel context.CancelFunc
	done   []chan error
	conn   interface{ Close() error }
}

// Start starts the pool cfg describes (its MRI socket in cfg.Site.StateDir) and its
// poollet, which checks the runtime every interval. c creates the namespace the
// poollets' Leases live in when it is missing (anvil dev and installs create it).
func Start(ctx context.Context, rc *rest.Config, c client.Client, cfg pool.Config, interval time.Duration) (*Running, error) {
	leases := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}}
	if err := c.Create(ctx, leases); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	p, err := pool.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r := &Running{Pool: p}
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
