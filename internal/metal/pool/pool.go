// Package pool runs one bare-metal pool's runtime side: a site (supervised Ironic, the
// provisioner and the Host controller) and the metal runtime serving the MRI over the
// site's Hosts. `anvil runtime metal`, `anvil dev` and the tests start pools through it.
package pool

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
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
	// ImageCache limits what the cache fetches (registry addresses, timeouts, sizes).
	ImageCache osimage.CacheOptions
	// ImageListen is the image server's address (default 127.0.0.1:0). Keep it fixed
	// across restarts: provisioned Hosts' image URLs name it.
	ImageListen string
	// ConsoleDir holds the servers' console logs; empty serves no consoles.
	ConsoleDir string
	Logger     logr.Logger
}

// Pool is a running pool.
type Pool struct {
	Site    *site.Site
	Runtime *metal.Runtime
	// ConsoleDir is Config.ConsoleDir: the servers' console logs, one file per machine id.
	ConsoleDir string
	cancel     context.CancelFunc
	done       chan error
}

// Start starts the site, then the runtime; it returns once the site's cache, which the
// runtime reads, has synced.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	s, err := site.Start(ctx, cfg.Site)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Pool, error) {
		s.Stop()
		return nil, err
	}
	// Every claim is a few requests and claims are serialised: the site's QPS, not
	// client-go's default of 5 a second.
	direct, err := client.New(cfg.Site.Limited(), client.Options{Scheme: s.Scheme})
	if err != nil {
		return fail(err)
	}
	// The runtime reads Hosts, HostPolicies and HardwareData of the site's namespace: the
	// site's cache holds them already (one cache in the process).
	c := s.Manager.GetCache()
	images, err := osimage.NewCache(cfg.ImageCacheDir, cfg.ImageCache)
	if err != nil {
		return fail(err)
	}
	rt, err := metal.New(metal.Options{Client: direct, APIReader: direct, Cache: c, Namespace: cfg.Site.Namespace,
		PoolName: cfg.Name, Images: images, ImageListen: cfg.ImageListen, ConsoleDir: cfg.ConsoleDir, Logger: cfg.Logger})
	if err != nil {
		return fail(err)
	}
	images.SetInUse(func() []string { return images.BlobPaths(rt.ImageChecksumsInUse()) })
	runCtx, cancel := context.WithCancel(context.Background())
	p := &Pool{Site: s, Runtime: rt, ConsoleDir: cfg.ConsoleDir, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- rt.Run(runCtx) }()
	return p, nil
}

// Stop stops the runtime, its cache and the site. Servers and their Hosts stay as they
// are; the next start picks them up.
func (p *Pool) Stop() error {
	p.Runtime.Close()
	p.cancel()
	err := <-p.done
	p.Site.Stop()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
