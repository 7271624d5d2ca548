package broker

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// Images reads OS images' manifests; *osimage.Cache is the real one.
type Images interface {
	// Entry reads the manifests and config of arch's entry, without its layers.
	Entry(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (osimage.Entry, error)
}

// Options configure a Runtime.
type Options struct {
	// Client writes the downstream Machines and Secrets.
	Client client.Client
	// Config is the broker's downstream identity, for the console calls it passes on to the
	// downstream console API (nil: it answers them UNIMPLEMENTED).
	Config *rest.Config
	// APIReader reads from the downstream API server, never a cache: a Machine a create
	// may have made before a restart. Defaults to Client, which must then not be cached.
	APIReader client.Reader
	// Cache holds the broker's Machines and Secrets of Namespace and the cluster's
	// MachinePools and MachineClasses (CacheOptions says so). The caller starts it.
	Cache cache.Cache
	// Namespace is the downstream namespace.
	Namespace string
	// PoolName is the upstream pool the broker serves: reported by Version, and the value
	// of its objects' broker.anvil.dev/pool label.
	PoolName string
	// PoolSelector picks the downstream pools the broker may use: its Machines' machine
	// pool selector, and the pools its capacity counts. Empty: every pool.
	PoolSelector map[string]string
	// Images checks at create that the image exists and has the architecture.
	Images Images
	// ProbeInterval is how often the downstream API is asked whether it answers (default
	// 5 s); UnreachableAfter how long it may fail before every machine says the site is
	// unreachable (default 15 s). Nothing is deleted for it.
	ProbeInterval, UnreachableAfter time.Duration
	Logger                          logr.Logger
}

// CacheOptions are what a cache needs to serve a broker of pool in namespace: its own
// Machines and Secrets only (by label), and the cluster-scoped MachinePools and
// MachineClasses whole.
func CacheOptions(namespace, pool string) cache.Options {
	own := labels.SelectorFromSet(labels.Set{mapping.LabelPool: pool})
	only := map[string]cache.Config{namespace: {}}
	return cache.Options{NewInformer: watchstats.NewInformer("broker-runtime"), ByObject: map[client.Object]cache.ByObject{
		&computev1alpha1.Machine{}: {Namespaces: only, Label: own},
		&corev1.Secret{}:           {Namespaces: only, Label: own},
	}}
}

func (o *Options) defaults() error {
	if o.Client == nil || o.Cache == nil || o.Images == nil {
		return errors.New("broker runtime: Client, Cache and Images are needed")
	}
	if o.Namespace == "" || o.PoolName == "" {
		return errors.New("broker runtime: Namespace and PoolName are needed")
	}
	if o.APIReader == nil {
		o.APIReader = o.Client
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.UnreachableAfter <= 0 {
		o.UnreachableAfter = 15 * time.Second
	}
	return nil
}
