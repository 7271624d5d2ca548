package metal

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/watchstats"
)

// Images reads and pulls OS images; *osimage.Cache is the real one.
type Images interface {
	// Entry reads the manifests and config of arch's entry, without its layers.
	Entry(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (osimage.Entry, error)
	// Pull returns the files of arch's entry of the image pinned to digest, as paths the
	// runtime reads but never writes.
	Pull(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (osimage.Files, error)
}

// Options configure a Runtime.
type Options struct {
	// Client writes Hosts, config-drive Secrets and tenants' HardwareData.
	Client client.Client
	// APIReader reads from the API server, never a cache: a Host just before claiming it,
	// Secrets, Machines. Defaults to Client, which must then not be cached.
	APIReader client.Reader
	// Cache holds Hosts, HostPolicies and HardwareData of Namespace, and MachineClasses
	// and Namespaces (CacheOptions says so). The caller starts it; Run waits for it.
	Cache cache.Cache
	// Namespace is the infrastructure namespace whose Hosts make the pool.
	Namespace string
	// PoolName starts every machine id and is reported by Version.
	PoolName string
	// Images holds the OS images whose disks the image server serves.
	Images Images
	// ImageListen is the image server's address; default 127.0.0.1:0. Hosts' image URLs
	// name it, so it must stay the same across restarts of a pool.
	ImageListen string
	// ImageURL is the image server's base URL as provisioned servers reach it; default
	// http://<the address listened on>.
	ImageURL string
	// Workers is how many Hosts the Run loop handles at once; default 4.
	Workers int
	// ConsoleDir, when set, holds the servers' console logs (one file per machine) and the
	// runtime serves the console calls (serial.go); empty: it answers them UNIMPLEMENTED.
	ConsoleDir string
	Logger     logr.Logger

	// sweepGrace spares config-drive Secrets this young (default sweepGrace).
	sweepGrace time.Duration
}

// CacheOptions are what a cache needs to serve a runtime for namespace: Hosts,
// HostPolicies and HardwareData of that namespace only (cluster-scoped MachineClasses
// and Namespaces are cached whole). Secrets are never cached.
func CacheOptions(namespace string) cache.Options {
	only := map[string]cache.Config{namespace: {}}
	return cache.Options{NewInformer: watchstats.NewInformer("metal-runtime"), ByObject: map[client.Object]cache.ByObject{
		&metalv1alpha1.Host{}:         {Namespaces: only},
		&metalv1alpha1.HostPolicy{}:   {Namespaces: only},
		&metalv1alpha1.HardwareData{}: {Namespaces: only},
	}}
}

func (o *Options) defaults() error {
	if o.Client == nil || o.Cache == nil || o.Images == nil {
		return errors.New("metal runtime: Client, Cache and Images are needed")
	}
	if o.Namespace == "" || o.PoolName == "" {
		return errors.New("metal runtime: Namespace and PoolName are needed")
	}
	if o.APIReader == nil {
		o.APIReader = o.Client
	}
	if o.ImageListen == "" {
		o.ImageListen = "127.0.0.1:0"
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.sweepGrace == 0 {
		o.sweepGrace = sweepGrace
	}
	return nil
}
