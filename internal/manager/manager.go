package manager

import (
	"context"
	"fmt"
	"github.com/anvil-dev/anvil/internal/events"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/controller/attachment"
	capicontroller "github.com/anvil-dev/anvil/internal/controller/capi"
	claimcontroller "github.com/anvil-dev/anvil/internal/controller/claim"
	"github.com/anvil-dev/anvil/internal/controller/index"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	schedulercontroller "github.com/anvil-dev/anvil/internal/controller/scheduler"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// Options are the knobs of the controller manager, all settable by flags.
type Options struct {
	// Concurrency is how many objects of one kind each controller reconciles at once.
	Concurrency int
	// QPS and Burst limit the manager's requests to the apiserver.
	QPS   float32
	Burst int
	// SyncPeriod is how often every watched object is reconciled again even without a change.
	SyncPeriod time.Duration
	// MetricsAddr and HealthAddr are where metrics and health probes are served; "0" turns
	// either off. Metrics are served over HTTPS to callers whose token may get /metrics
	// (the anvil-metrics-reader ClusterRole): their counts and names describe every tenant.
	MetricsAddr string
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint; empty serves a
	// self-signed certificate made at start.
	MetricsCertDir string
	HealthAddr     string
	// SchedulerStrategy is "spread" or "pack".
	SchedulerStrategy string
	// ImageArchitectures is where the scheduler learns which architectures an image
	// offers: "registry" (read the image's index) or "any" (assume every architecture and
	// rely on the runtime's refusal; for registries the manager cannot reach).
	ImageArchitectures string
	// AllowRegistry lists the registries on loopback, link-local or private addresses whose
	// image indexes the scheduler may read (registrynet.ParseAllowed: HOST[:PORT] or a
	// CIDR); an image on any other such address is refused without a connection
	// (RegistryRefused): tenants name the images, and the manager sits inside the site.
	AllowRegistry []string
	// RegistryCredentials is a docker config file whose logins the scheduler presents to
	// the registries it names (registrynet.LoadLogins): a registry that refuses anonymous
	// reads (anvil's own, with a read credential). Empty reads anonymously.
	RegistryCredentials string
	// LeaderElection makes only one of several replicas active at a time.
	LeaderElection          bool
	LeaderElectionNamespace string
	// ImageBuilds is where OS image builds run (the builder image, its network, the registry).
	ImageBuilds osimagecontroller.Config
	// ClusterAPI runs the Cluster API infrastructure provider (AnvilCluster and AnvilMachine
	// controllers) even when its kinds are not served yet, failing if they are not; without
	// it the provider runs when Cluster API's and anvil's provider CRDs are installed at start.
	ClusterAPI bool
	// CAPIExtension serves Cluster API's in-place update hooks (a new image reimages the
	// machines in place); off while its BindAddress is empty. It needs the provider.
	CAPIExtension extension.Options
	// CAPIIdentityAllowLoopback lets AnvilClusters' identityRef kubeconfigs name a control
	// plane on a loopback address (tests; one host running two anvils). Off, such a server
	// is refused: a tenant's kubeconfig would otherwise reach this host's own services.
	CAPIIdentityAllowLoopback bool
	// SkipControllerNameValidation allows building more than one manager in one process,
	// as tests and benchmarks do; controller names are otherwise checked for uniqueness.
	SkipControllerNameValidation bool
}

// DefaultOptions suit one manager against a dedicated apiserver.
func DefaultOptions() Options {
	return Options{
		Concurrency: 4,
		QPS:         200,
		Burst:       400,
		SyncPeriod:  10 * time.Hour,
		MetricsAddr: "127.0.0.1:8443",
		HealthAddr:  "127.0.0.1:8081",

		SchedulerStrategy:  "spread",
		ImageArchitectures: ImageArchitecturesRegistry,
	}
}

// AddFlags registers o's fields as flags on fs, with o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "objects of one kind each controller reconciles at once")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "requests per second the manager may send to the apiserver")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "requests the manager may send in a burst above --kube-api-qps")
	fs.DurationVar(&o.SyncPeriod, "resync-period", o.SyncPeriod, "how often every object is reconciled again without a change")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the metrics endpoint (HTTPS; a token allowed to get /metrics is needed); 0 turns it off")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "folder holding tls.crt and tls.key of the metrics endpoint; empty serves a self-signed certificate")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", o.HealthAddr, "address of the /healthz and /readyz endpoints; 0 turns them off")
	fs.StringVar(&o.SchedulerStrategy, "scheduler-strategy", o.SchedulerStrategy, "which fitting pool a Machine goes to: spread (most free) or pack (least free)")
	fs.StringVar(&o.ImageArchitectures, "image-architectures", o.ImageArchitectures, "where the scheduler learns an image's architectures: registry (its index) or any (assume all; the runtime refuses a wrong one)")
	fs.StringVar(&o.ImageBuilds.BuilderImage, "builder-image", o.ImageBuilds.BuilderImage, "OS image index of builder Machines (an anvil OS image with anvil-build-agent)")
	fs.StringVar(&o.ImageBuilds.BuilderNetwork, "builder-network", o.ImageBuilds.BuilderNetwork, "NIC network of builder Machines; pools forward the registry to it")
	fs.StringVar(&o.ImageBuilds.Registry, "builder-registry", o.ImageBuilds.Registry, "host:port of the registry builders read bases from and push to")
	fs.StringVar(&o.ImageBuilds.GuestRegistry, "builder-guest-registry", o.ImageBuilds.GuestRegistry, "host:port builders reach that registry at on their network")
	fs.BoolVar(&o.ImageBuilds.GuestPlainHTTP, "builder-guest-plain-http", o.ImageBuilds.GuestPlainHTTP, "builders speak plain HTTP to the registry's guest address")
	fs.StringSliceVar(&o.ImageBuilds.SharedFolders, "shared-image-folder", o.ImageBuilds.SharedFolders, "a folder of the builders' registry (such as infra/os) every namespace may use as an OSImage's base and none may publish into, besides anvil/ and the builder image's; repeat for more")
	fs.StringSliceVar(&o.AllowRegistry, "allow-registry", o.AllowRegistry, registrynet.AllowRegistryUsage)
	fs.StringVar(&o.RegistryCredentials, "registry-credentials", o.RegistryCredentials, registrynet.RegistryCredentialsUsage)
	fs.BoolVar(&o.ClusterAPI, "capi", o.ClusterAPI, "run the Cluster API infrastructure provider, failing if Cluster API's and anvil's provider CRDs are not installed (without it: run it when they are installed at start)")
	fs.StringVar(&o.CAPIExtension.BindAddress, "capi-extension-bind-address", o.CAPIExtension.BindAddress, "HOST:PORT of Cluster API's in-place update extension (HTTPS; Runtime SDK hooks CanUpdateMachineSet, CanUpdateMachine, UpdateMachine); empty turns it off")
	fs.StringVar(&o.CAPIExtension.CertDir, "capi-extension-cert-dir", o.CAPIExtension.CertDir, "folder holding the extension's tls.crt and tls.key; when missing, a self-signed certificate for 127.0.0.1 is made there (its tls.crt is the ExtensionConfig's caBundle)")
	fs.StringVar(&o.CAPIExtension.ClientCAFile, "capi-extension-client-ca", o.CAPIExtension.ClientCAFile, "PEM file of the CA that signed Cluster API's --runtime-extension-client-cert-file: only callers with such a certificate are answered")
	fs.BoolVar(&o.CAPIIdentityAllowLoopback, "capi-identity-allow-loopback", o.CAPIIdentityAllowLoopback, "let AnvilClusters' identityRef kubeconfigs name a control plane on a loopback address (link-local and cloud metadata addresses stay refused)")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect one active manager among replicas")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
}

// Validate says what to fix in o, if anything.
func (o Options) Validate() error {
	switch {
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", o.Concurrency)
	case o.QPS <= 0:
		return fmt.Errorf("--kube-api-qps must be positive, not %v", o.QPS)
	case o.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1, not %d", o.Burst)
	case o.SyncPeriod <= 0:
		return fmt.Errorf("--resync-period must be positive, not %s", o.SyncPeriod)
	}
	if _, err := scheduler.ParseStrategy(o.SchedulerStrategy); err != nil {
		return fmt.Errorf("--scheduler-strategy: %w", err)
	}
	if o.ImageArchitectures != ImageArchitecturesRegistry && o.ImageArchitectures != ImageArchitecturesAny {
		return fmt.Errorf("--image-architectures must be %s or %s, not %q", ImageArchitecturesRegistry, ImageArchitecturesAny, o.ImageArchitectures)
	}
	for _, f := range o.ImageBuilds.SharedFolders {
		if _, err := imageowner.ParseFolder(f); err != nil {
			return fmt.Errorf("--shared-image-folder: %w", err)
		}
	}
	if _, err := registrynet.ParseAllowList(o.AllowRegistry); err != nil {
		return fmt.Errorf("--allow-registry: %w", err)
	}
	if _, err := registrynet.LoadLogins(o.RegistryCredentials); err != nil {
		return fmt.Errorf("--registry-credentials: %w", err)
	}
	return o.CAPIExtension.Validate()
}

// Values of Options.ImageArchitectures.
const (
	ImageArchitecturesRegistry = "registry"
	ImageArchitecturesAny      = "any"
)

// imageResolver is the scheduler's source of image architectures. o is valid.
func (o Options) imageResolver() schedulercontroller.ImageResolver {
	if o.ImageArchitectures == ImageArchitecturesAny {
		return schedulercontroller.UnrestrictedImages{}
	}
	allow, _ := registrynet.ParseAllowList(o.AllowRegistry)
	logins, _ := registrynet.LoadLogins(o.RegistryCredentials) // read by Validate
	return schedulercontroller.RegistryImages{Registry: &imageref.Registry{TagTTL: 30 * time.Second,
		Transport: registrynet.Policy{Allow: allow, Logins: logins}.Transport()}, Timeout: 10 * time.Second}
}

// New returns a manager with every anvil controller registered; Start runs them.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			SyncPeriod: &o.SyncPeriod,
			// Only pool heartbeats are read among Leases.
			ByObject: map[client.Object]cache.ByObject{
				&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{computev1alpha1.PoolLeaseNamespace: {}}},
				// Only the Roles anvil made for poollets.
				&rbacv1.Role{}: {Label: poolRoles},
			},
		},
		Controller: config.Controller{
			MaxConcurrentReconciles: o.Concurrency,
			SkipNameValidation:      &o.SkipControllerNameValidation,
		},
		Metrics:                 o.metricsServer(),
		HealthProbeBindAddress:  o.HealthAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "anvil-controller-manager",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := addControllers(mgr, o); err != nil {
		return nil, err
	}
	if o.HealthAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// metricsServer serves metrics only over HTTPS and only to callers whose token the
// apiserver authenticates and allows to get the /metrics non-resource URL (TokenReview
// and SubjectAccessReview), never to anonymous callers or tenants.
func (o Options) metricsServer() metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		CertDir:        o.MetricsCertDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}

// poolRoles selects the Roles the secretaccess controller manages.
var poolRoles = func() labels.Selector {
	req, _ := labels.NewRequirement(secretaccess.LabelPool, selection.Exists, nil)
	return labels.NewSelector().Add(*req)
}()

// addControllers registers every controller of the manager, one per kind.
func addControllers(mgr ctrl.Manager, o Options) error {
	if err := index.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	strategy, _ := scheduler.ParseStrategy(o.SchedulerStrategy) // checked by Validate
	c := mgr.GetClient()
	for _, add := range []func() error{
		func() error {
			return (&schedulercontroller.Reconciler{Client: c, Strategy: strategy, Resolver: o.imageResolver(),
				Events: events.New(mgr.GetEventRecorder("scheduler"), nil)}).SetupWithManager(mgr, o.Concurrency)
		},
		func() error { return claimcontroller.NewVolumeReconciler(c).SetupWithManager(mgr, o.Concurrency) },
		func() error {
			return claimcontroller.NewNetworkInterfaceReconciler(c).SetupWithManager(mgr, o.Concurrency)
		},
		func() error { return (&attachment.Reconciler{Client: c}).SetupWithManager(mgr, o.Concurrency) },
		func() error { return (&secretaccess.Reconciler{Client: c}).SetupWithManager(mgr) },
		func() error { return osimagecontroller.Setup(mgr, o.ImageBuilds, o.Concurrency) },
		func() error { return addClusterAPI(mgr, o) },
	} {
		if err := add(); err != nil {
			return err
		}
	}
	return nil
}

// addClusterAPI registers the Cluster API provider when its kinds are served, or fails
// when they are not and o.ClusterAPI asks for it.
func addClusterAPI(mgr ctrl.Manager, o Options) error {
	if err := capicontroller.Installed(mgr.GetRESTMapper()); err != nil {
		if o.ClusterAPI {
			return fmt.Errorf("--capi: %w", err)
		}
		if o.CAPIExtension.BindAddress != "" {
			return fmt.Errorf("--capi-extension-bind-address: the extension needs the Cluster API provider: %w", err)
		}
		mgr.GetLogger().Info("Cluster API provider off: its kinds are not served", "reason", err.Error())
		return nil
	}
	computes, err := capicontroller.Setup(mgr, capicontroller.Options{Concurrency: o.Concurrency, AllowLoopback: o.CAPIIdentityAllowLoopback})
	if err != nil || o.CAPIExtension.BindAddress == "" {
		return err
	}
	return mgr.Add(&extension.Runnable{Options: o.CAPIExtension, Reader: mgr.GetClient(), Machines: computes,
		Log: mgr.GetLogger().WithName("capi-extension")})
}
