// Package pool runs one bare-metal pool's runtime side: a site (supervised Ironic, the
// provisioner and the Host controller) and the metal runtime serving the MRI over the
// site's Hosts. `anvil runtime metal`, `anvil dev` and the tests start pools through it.
package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/metal"
)

// Config says how to run a pool.
type Config struct {
	// Site is Ironic's and the Host controller's configuration; Site.Namespace holds the
	// pool's Hosts.
	Site site.Config
	// Name is the MachinePool's name.
	Name string
	// ImageCacheDir holds the OS images whose disks are served to servers.
	ImageCacheDir string
	// ImageListen is the image server's address (default 127.0.0.1:0). Keep it fixed
	// across restarts: provisioned Hosts' image URLs name it.
	ImageListen string
	Log         logr.Logger
}

// Pool is a running pool.
type Pool struct {
	Site    *site.Site
	Runtime *metal.Runtime
	cancel  context.CancelFunc
	done    chan error
}

// Start starts the site, then the runtime; it returns once the runtime has read its Hosts'
// cache.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	s, err := site.Start(ctx, cfg.Site)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Pool, error) {
		s.Stop()
		return nil, err
	}
	// Every claim is a few requests and claims are serialised: client-go's default 5 QPS
	// would be the pool's bottleneck.
	rc := rest.CopyConfig(cfg.Site.RestConfig)
	rc.QPS, rc.Burst = 100, 200
	direct, err := client.New(rc, client.Options{Scheme: s.Scheme})
	if err != nil {
		return fail(err)
	}
	co := metal.CacheOptions(cfg.Site.Namespace)
	co.Scheme = s.Scheme
	c, err := cache.New(cfg.Site.RestConfig, co)
	if err != nil {
		return fail(err)
	}
	images, err := osimage.NewCache(cfg.ImageCacheDir)
	if err != nil {
		return fail(err)
	}
	rt, err := metal.New(metal.Options{Client: direct, APIReader: direct, Cache: c, Namespace: cfg.Site.Namespace,
		PoolName: cfg.Name, Images: images, ImageListen: cfg.ImageListen, Log: cfg.Log})
	if err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &Pool{Site: s, Runtime: rt, cancel: cancel, done: make(chan error, 2)}
	go func() { p.done <- c.Start(runCtx) }()
	go func() { p.done <- rt.Run(runCtx) }()
	if !c.WaitForCacheSync(ctx) {
		p.Stop()
		return nil, fmt.Errorf("the metal runtime's cache did not sync")
	}
	return p, nil
}

// Stop stops the runtime, its cache and the site. Servers and their Hosts stay as they
// are; the next start picks them up.
func (p *Pool) Stop() error {
	p.Runtime.Close()
	p.cancel()
	var errs []error
	for i := 0; i < 2; i++ {
		if err := <-p.done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	p.Site.Stop()
	return errors.Join(errs...)
}
