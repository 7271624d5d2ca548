package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// imageCacheFlags are a runtime's limits on the images its tenants name.
type imageCacheFlags struct {
	allow              []string
	credentials        string
	maxLayer, maxCache string
	opts               osimage.CacheOptions
}

// addImageCacheFlags adds the flags of a runtime's image cache. Both runtimes tell their
// cache which images their machines use, so both may evict.
func addImageCacheFlags(fl *pflag.FlagSet) *imageCacheFlags {
	f := &imageCacheFlags{}
	fl.StringSliceVar(&f.allow, "allow-registry", nil, registrynet.AllowRegistryUsage)
	fl.StringVar(&f.credentials, "registry-credentials", "", registrynet.RegistryCredentialsUsage)
	fl.DurationVar(&f.opts.Network.Timeout, "registry-timeout", registrynet.DefaultTimeout, "longest wait on a registry (to connect, for an answer, between two reads)")
	fl.StringVar(&f.maxLayer, "max-layer-size", resource.NewQuantity(osimage.DefaultMaxLayerBytes, resource.BinarySI).String(), "largest image layer (kernel, initramfs, disk) pulled; larger ones are refused before download")
	fl.StringVar(&f.maxCache, "max-cache-size", "0", "size the image cache is brought back under after each pull, by evicting images no machine uses, least recently used first (0: no limit)")
	return f
}

// options checks the flags and returns the cache's options.
func (f *imageCacheFlags) options() (osimage.CacheOptions, error) {
	o := f.opts
	var err error
	if o.Network.Allow, err = registrynet.ParseAllowList(f.allow); err != nil {
		return o, fmt.Errorf("--allow-registry: %w", err)
	}
	if o.Network.Logins, err = registrynet.LoadLogins(f.credentials); err != nil {
		return o, fmt.Errorf("--registry-credentials: %w", err)
	}
	if o.MaxLayerBytes, err = size("--max-layer-size", f.maxLayer); err != nil {
		return o, err
	}
	if o.MaxBytes, err = size("--max-cache-size", f.maxCache); err != nil {
		return o, err
	}
	return o, nil
}

func size(flag, v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("%s %q: want a size such as 512Mi or 20Gi", flag, v)
	}
	return q.Value(), nil
}
