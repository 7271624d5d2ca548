// Package capiprovider builds anvil's Cluster API infrastructure provider as a process of
// its own (anvil capi-provider): the AnvilCluster, AnvilMachine, AnvilRemediation and
// AnvilDataTemplate controllers and, when asked, the in-place update extension.
//
// It runs under an identity of its own, the ServiceAccount anvil-capi-provider bound to
// the ClusterRole of the same name generated from this package's and the provider
// controllers' RBAC markers: no bind on pools, no RBAC writes, no Secret lists. A bug in
// the provider, which reads tenant-written kubeconfigs and bootstrap data, can then use
// only the provider's rights, never the scheduler's (bind) or secretaccess's (Roles).
package capiprovider

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/anvil-dev/anvil/internal/capi/extension"
	capicontroller "github.com/anvil-dev/anvil/internal/controller/capi"
	"github.com/anvil-dev/anvil/internal/manager"
)

// The provider's own leader election Lease, in its namespace, and its Events.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=anvil-system
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// The metrics endpoint asks the apiserver who a caller is and whether it may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options are the provider's knobs, all settable by flags.
type Options struct {
	manager.Base
	// Extension serves Cluster API's in-place update hooks (a new image reimages the
	// machines in place); off while its BindAddress is empty.
	Extension extension.Options
	// AllowLoopback lets AnvilClusters' identityRef kubeconfigs name a control plane on a
	// loopback address (tests; one host running two anvils). Off, such a server is refused:
	// a tenant's kubeconfig would otherwise reach this host's own services.
	AllowLoopback bool
	// ControlPlaneEndpointGrace is how long a control-plane machine runs before its
	// cluster's endpoint, accepting no connection, is called unreachable.
	ControlPlaneEndpointGrace time.Duration
}

// DefaultOptions suit one provider beside one manager on the same host (other metrics and
// probe ports than the manager's).
func DefaultOptions() Options {
	return Options{Base: manager.DefaultBase("127.0.0.1:8444", "127.0.0.1:8082"), ControlPlaneEndpointGrace: capicontroller.DefaultEndpointGrace}
}

// AddFlags registers o's fields as flags on fs, with o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Base.AddFlags(fs)
	fs.StringVar(&o.Extension.BindAddress, "capi-extension-bind-address", o.Extension.BindAddress, "HOST:PORT of Cluster API's in-place update extension (HTTPS; Runtime SDK hooks CanUpdateMachineSet, CanUpdateMachine, UpdateMachine); empty turns it off")
	fs.StringVar(&o.Extension.CertDir, "capi-extension-cert-dir", o.Extension.CertDir, "folder holding the extension's tls.crt and tls.key; when missing, a self-signed certificate for 127.0.0.1 is made there (its tls.crt is the ExtensionConfig's caBundle)")
	fs.StringVar(&o.Extension.ClientCAFile, "capi-extension-client-ca", o.Extension.ClientCAFile, "PEM file of the CA that signed Cluster API's --runtime-extension-client-cert-file: only callers with such a certificate are answered")
	fs.DurationVar(&o.ControlPlaneEndpointGrace, "control-plane-endpoint-grace", o.ControlPlaneEndpointGrace, "how long a control-plane machine runs before its cluster's control-plane endpoint, accepting no TCP connection from here, is called unreachable on its AnvilMachine (ControlPlaneEndpointReachable=False EndpointUnreachable); emulated machines need longer")
	fs.BoolVar(&o.AllowLoopback, "capi-identity-allow-loopback", o.AllowLoopback, "let AnvilClusters' identityRef kubeconfigs name a control plane on a loopback address (link-local and cloud metadata addresses stay refused)")
}

// Validate says what to fix in o, if anything.
func (o Options) Validate() error {
	if err := o.Base.Validate(); err != nil {
		return err
	}
	return o.Extension.Validate()
}

// New returns the provider's controller manager, its controllers (and the extension, when
// asked) registered; Start runs them. It fails, saying what to install, when Cluster API's
// or anvil's provider kinds are not served.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mgr, err := manager.NewControllerManager(cfg, o.Base, "anvil-capi-provider", cache.Options{})
	if err != nil {
		return nil, err
	}
	if err := capicontroller.Installed(mgr.GetRESTMapper()); err != nil {
		return nil, err
	}
	computes, err := capicontroller.Setup(mgr, capicontroller.Options{Concurrency: o.Concurrency, AllowLoopback: o.AllowLoopback,
		EndpointGrace: o.ControlPlaneEndpointGrace})
	if err != nil {
		return nil, fmt.Errorf("setting up the provider's controllers: %w", err)
	}
	if o.Extension.BindAddress != "" {
		if err := mgr.Add(&extension.Runnable{Options: o.Extension, Reader: mgr.GetClient(), Machines: computes,
			Log: mgr.GetLogger().WithName("capi-extension")}); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}
