// Package site runs the infrastructure half of one bare-metal site: a supervised Ironic,
// the Ironic provisioner in front of it, and the Host controller for the Hosts of one
// infrastructure namespace. `anvil runtime metal` adds the MRI server on top; tests start a
// Site to drive Hosts through a real Ironic, often one Ironic for many Sites
// (Config.Ironic).
package site

import (
	"context"
	"fmt"
	"github.com/anvil-dev/anvil/internal/events"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/anvil-dev/anvil/api"
	hostcontroller "github.com/anvil-dev/anvil/internal/controller/host"
	"github.com/anvil-dev/anvil/internal/controller/host/imagecheck"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	ironicprovisioner "github.com/anvil-dev/anvil/internal/provisioner/ironic"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// CredentialsSecret is the Secret, in the site's namespace, holding Ironic's generated
// API password. Only the site reads it; tenants have no access to the namespace.
const CredentialsSecret = "anvil-ironic-credentials"

// Config says how to run a site.
type Config struct {
	// RestConfig reaches the kube-apiserver.
	RestConfig *rest.Config
	// Namespace holds the site's Hosts, their Secrets, HardwareData and HostPolicies.
	Namespace string
	// StateDir holds Ironic's configuration, database and log.
	StateDir string
	// Ironic, when set, is an Ironic already running that the site uses instead of
	// starting its own (tests share one among their sites): the site takes its
	// credentials rather than the namespace's credentials Secret and leaves it running at
	// Stop. Its configuration is its starter's: IronicPort, ESPImage, FakeDelays and
	// Ironic's cleaning (Wipe method ironic) must then be left unset, MaxConcurrentDeploy
	// and MaxConcurrentClean limit only the site's queue, and its restarts do not make the
	// site enrol its Hosts again at once (its starter's OnRestart would).
	Ironic *ironic.Ironic
	// IronicPort is Ironic's API port on 127.0.0.1; 0 picks a free one.
	IronicPort int
	// MaxConcurrentDeploy and MaxConcurrentClean limit Ironic and anvil's queue in front
	// of it alike; 0 keeps Ironic's defaults (250 and 50).
	MaxConcurrentDeploy, MaxConcurrentClean int
	// ESPImage is the EFI system partition image of the UEFI boot ISOs Ironic builds (make
	// esp); without it only Legacy Hosts boot a kernel + initramfs image (ironic.Config).
	ESPImage string
	// Wipe says how released servers' disks are erased; its Method is required.
	Wipe Wipe
	// FakeDelays slow Ironic's fake hardware down (tests, benchmarks).
	FakeDelays ironic.FakeDelays
	// Workers is how many Hosts are reconciled at once (default 64).
	Workers int
	// BusyPoll is how often a busy server is asked about (default 2 s).
	BusyPoll time.Duration
	// MaxBackoff caps the wait between attempts on a failing Host (default 60 s).
	MaxBackoff time.Duration
	// QPS and Burst limit the site's and its pool's requests to the apiserver (default
	// 100 and 200: one status write per Host step, and client-go's default of 5 a second
	// would pace a fleet's provisioning instead of Ironic).
	QPS   float32
	Burst int
	// Logger receives the site's logs.
	Logger logr.Logger
	// WrapProvisioner, when set, wraps the provisioner the Host controller uses (tests
	// count calls with it).
	WrapProvisioner func(provisioner.Provisioner) provisioner.Provisioner
}

// Site is a running site.
type Site struct {
	Ironic      *ironic.Ironic
	Provisioner provisioner.Provisioner
	Manager     ctrl.Manager
	Scheme      *runtime.Scheme
	// ownIronic says the site started Ironic, and so stops it.
	ownIronic bool
	cancel    context.CancelFunc
	done      chan error
	// closeProvisioner stops the provisioner's background checks.
	closeProvisioner func()
	eraser           *eraserServer
}

// Start starts Ironic, the provisioner and the Host controller. It returns once they run.
func Start(ctx context.Context, cfg Config) (*Site, error) {
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("a site needs the namespace of its Hosts")
	}
	if err := cfg.Wipe.check(); err != nil {
		return nil, err
	}
	if err := cfg.checkIronic(); err != nil {
		return nil, err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	direct, err := client.New(cfg.RestConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	var user, pass string
	if cfg.Ironic != nil {
		user, pass = cfg.Ironic.Credentials()
	} else if user, pass, err = ironic.EnsureCredentials(ctx, direct, cfg.Namespace, CredentialsSecret); err != nil {
		return nil, fmt.Errorf("ironic credentials: %w", err)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg.Limited(), ctrl.Options{
		Scheme:                 scheme,
		Logger:                 cfg.Logger,
		Cache:                  cache.Options{NewInformer: watchstats.NewInformer("metal-site"), DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, err
	}
	r := &hostcontroller.Reconciler{Client: mgr.GetClient(), Images: &imagecheck.Checker{}, Events: events.New(mgr.GetEventRecorder("host"), nil), BusyPoll: cfg.BusyPoll, MaxBackoff: cfg.MaxBackoff,
		WipeTimeout: cfg.Wipe.Timeout}
	var eraser *eraserServer
	if cfg.Wipe.Method == WipeEraser {
		if eraser, err = serveEraser(cfg.Wipe, filepath.Join(dir, "eraser")); err != nil {
			return nil, err
		}
		r.Eraser = eraser.images
	}
	runCtx, cancel := context.WithCancel(context.Background())
	runCtx = logr.NewContext(runCtx, cfg.Logger)
	irc := cfg.Ironic
	if irc == nil {
		irc, err = ironic.Start(ctx, ironic.Config{StateDir: filepath.Join(dir, "ironic"), Port: cfg.IronicPort,
			Username: user, Password: pass, MaxConcurrentDeploy: cfg.MaxConcurrentDeploy, MaxConcurrentClean: cfg.MaxConcurrentClean,
			ESPImage: cfg.ESPImage, Cleaning: cfg.Wipe.cleaning(), FakeDelays: cfg.FakeDelays, Logger: cfg.Logger.WithName("ironic"),
			// A restarted Ironic may have lost its database: its Hosts are enrolled again now.
			OnRestart: func() { go r.RecheckAll(runCtx, cfg.Namespace) }})
		if err != nil {
			cancel()
			eraser.Close()
			return nil, err
		}
	}
	s := &Site{Ironic: irc, ownIronic: cfg.Ironic == nil, Manager: mgr, Scheme: scheme, cancel: cancel, done: make(chan error, 1), eraser: eraser}
	fail := func(err error) (*Site, error) {
		cancel()
		eraser.Close()
		if s.closeProvisioner != nil {
			s.closeProvisioner()
		}
		s.stopIronic()
		return nil, err
	}
	prov, err := ironicprovisioner.New(ctx, ironicprovisioner.Options{Endpoint: irc.Endpoint(), Username: user, Password: pass,
		MaxConcurrentDeploy: cfg.MaxConcurrentDeploy, MaxConcurrentClean: cfg.MaxConcurrentClean, Logger: cfg.Logger.WithName("provisioner"),
		// A Host told to wait for a deploy or clean slot is looked at as soon as one frees.
		OnSlotFree: func(node string) {
			if key, ok := provisioner.HostKey(node); ok {
				r.Recheck(key)
			}
		}})
	if err != nil {
		return fail(err)
	}
	s.Provisioner, s.closeProvisioner = prov, prov.Close
	if cfg.WrapProvisioner != nil {
		s.Provisioner = cfg.WrapProvisioner(prov)
	}
	r.Provisioner = s.Provisioner
	workers := cfg.Workers
	if workers == 0 {
		workers = 64
	}
	if err := r.SetupWithManager(ctx, mgr, workers); err != nil {
		return fail(err)
	}
	go func() { s.done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		s.Stop()
		return nil, fmt.Errorf("the site's cache did not sync")
	}
	return s, nil
}

// checkIronic refuses a configuration of Ironic for a site given a running one: it would
// be silently ignored.
func (cfg Config) checkIronic() error {
	if cfg.Ironic == nil {
		return nil
	}
	if cfg.IronicPort != 0 || cfg.ESPImage != "" || cfg.FakeDelays != (ironic.FakeDelays{}) || cfg.Wipe.cleaning() != ironic.CleanNone {
		return fmt.Errorf("a site given a running Ironic cannot configure it: IronicPort, ESPImage, FakeDelays and wipe method %s are its starter's", WipeIronic)
	}
	return nil
}

// Limited is the site's apiserver configuration with its QPS and Burst (or their
// defaults): its pool's runtime uses the same.
func (cfg Config) Limited() *rest.Config {
	rc := rest.CopyConfig(cfg.RestConfig)
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	if rc.QPS <= 0 {
		rc.QPS = 100
	}
	if rc.Burst <= 0 {
		rc.Burst = 200
	}
	return rc
}

// Stop stops the Host controller, then Ironic when the site started it (not one given
// in Config.Ironic). Servers are left as they are.
func (s *Site) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
		s.cancel = nil
	}
	s.closeProvisioner()
	s.stopIronic()
	s.eraser.Close()
}

func (s *Site) stopIronic() {
	if s.ownIronic {
		s.Ironic.Stop()
	}
}
