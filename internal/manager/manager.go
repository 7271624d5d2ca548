package manager

import (
	"context"
	"fmt"
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

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/controller/attachment"
	claimcontroller "github.com/anvil-dev/anvil/internal/controller/claim"
	"github.com/anvil-dev/anvil/internal/controller/index"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	schedulercontroller "github.com/anvil-dev/anvil/internal/controller/scheduler"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// Options are the knobs of the controller manager, all settable by flags.
type Options struct {
	Base
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
	// ImageBuilds is where OS image builds run (the builder image, its network, the registry).
	ImageBuilds osimagecontroller.Config
	// ConsoleAddress is where the console server listens (docs/console.md), empty for none.
	// In a cluster every replica serves it behind the Service anvil-console; anvil dev runs
	// its own instead.
	ConsoleAddress string
}

// DefaultOptions suit one manager against a dedicated apiserver.
func DefaultOptions() Options {
	return Options{
		Base: DefaultBase("127.0.0.1:8443", "127.0.0.1:8081"),

		SchedulerStrategy:  "spread",
		ImageArchitectures: ImageArchitecturesRegistry,
	}
}

// AddFlags registers o's fields as flags on fs, with o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Base.AddFlags(fs)
	fs.StringVar(&o.SchedulerStrategy, "scheduler-strategy", o.SchedulerStrategy, "which fitting pool a Machine goes to: spread (most free) or pack (least free)")
	fs.StringVar(&o.ImageArchitectures, "image-architectures", o.ImageArchitectures, "where the scheduler learns an image's architectures: registry (its index) or any (assume all; the runtime refuses a wrong one)")
	fs.StringVar(&o.ImageBuilds.BuilderImage, "builder-image", o.ImageBuilds.BuilderImage, "OS image index of builder Machines (an anvil OS image with anvil-build-agent)")
	fs.StringVar(&o.ImageBuilds.BuilderNetwork, "builder-network", o.ImageBuilds.BuilderNetwork, "NIC network of builder Machines; pools forward the registry to it")
	fs.StringVar(&o.ImageBuilds.Registry, "builder-registry", o.ImageBuilds.Registry, "host:port of the registry builders read bases from and push to")
	fs.StringVar(&o.ImageBuilds.GuestRegistry, "builder-guest-registry", o.ImageBuilds.GuestRegistry, "host:port builders reach that registry at on their network")
	fs.BoolVar(&o.ImageBuilds.GuestPlainHTTP, "builder-guest-plain-http", o.ImageBuilds.GuestPlainHTTP, "builders speak plain HTTP to the registry's guest address")
	fs.StringVar(&o.ImageBuilds.PackageProxy, "builder-package-proxy", o.ImageBuilds.PackageProxy, "host:port of an HTTP proxy or mirror builders reach on their network for packages (apt), forwarded by the pools like the registry; RUN steps get it as http_proxy; without it a recipe that runs apt is refused")
	fs.StringSliceVar(&o.ImageBuilds.SharedFolders, "shared-image-folder", o.ImageBuilds.SharedFolders, "a folder of the builders' registry (such as infra/os) every namespace may use as an OSImage's base and none may publish into, besides anvil/ and the builder image's; repeat for more")
	fs.StringSliceVar(&o.AllowRegistry, "allow-registry", o.AllowRegistry, registrynet.AllowRegistryUsage)
	fs.StringVar(&o.RegistryCredentials, "registry-credentials", o.RegistryCredentials, registrynet.RegistryCredentialsUsage)
	fs.StringVar(&o.ConsoleAddress, "console-address", o.ConsoleAddress, "HOST:PORT the console server (Machines' consoles through the API, docs/console.md) listens on, with the certificate in Secret "+consoleapi.ServingSecret.String()+"; empty serves none")
}

// Validate says what to fix in o, if anything.
func (o Options) Validate() error {
	if err := o.Base.Validate(); err != nil {
		return err
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
	return nil
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

// imageFolders are the registries the scheduler reads with its own credential, each held
// to namespaces' folders. o is valid.
func (o Options) imageFolders() []imageowner.Folders {
	logins, _ := registrynet.LoadLogins(o.RegistryCredentials) // read by Validate
	return imageowner.FoldersFor(logins, o.ImageBuilds.SharedFolders)
}

// New returns a manager with every anvil controller registered; Start runs them. The
// Cluster API provider is not among them: it runs under an identity of its own
// (internal/capiprovider, anvil capi-provider).
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mgr, err := NewControllerManager(cfg, o.Base, "anvil-controller-manager", cache.Options{
		// Only pool heartbeats are read among Leases.
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{computev1alpha1.PoolLeaseNamespace: {}}},
			// Only the Roles anvil made for poollets.
			&rbacv1.Role{}: {Label: poolRoles},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := addControllers(mgr, o); err != nil {
		return nil, err
	}
	if o.ConsoleAddress != "" {
		if err := addConsoleServer(mgr, cfg, o.ConsoleAddress); err != nil {
			return nil, err
		}
	}
	return mgr, nil
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
				ImageFolders: o.imageFolders(), Events: events.New(mgr.GetEventRecorder("scheduler"), nil)}).SetupWithManager(mgr, o.Concurrency)
		},
		func() error { return claimcontroller.NewVolumeReconciler(c).SetupWithManager(mgr, o.Concurrency) },
		func() error {
			return claimcontroller.NewNetworkInterfaceReconciler(c).SetupWithManager(mgr, o.Concurrency)
		},
		func() error { return (&attachment.Reconciler{Client: c}).SetupWithManager(mgr, o.Concurrency) },
		func() error { return (&secretaccess.Reconciler{Client: c}).SetupWithManager(mgr) },
		func() error { return osimagecontroller.Setup(mgr, o.ImageBuilds, o.Concurrency) },
	} {
		if err := add(); err != nil {
			return err
		}
	}
	return nil
}
