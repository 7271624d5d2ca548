package osimage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Index assembles per-architecture OS images into one OCI image index. Entries are
// sorted by platform, so the same images in any order give the same index digest; two
// images of one architecture are refused.
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, fmt.Errorf("an image index needs at least one image")
	}
	adds := make([]mutate.IndexAddendum, 0, len(images))
	seen := map[computev1alpha1.Architecture]bool{}
	for _, img := range images {
		cfg, err := configOf(img)
		if err != nil {
			return nil, err
		}
		if seen[cfg.Architecture] {
			return nil, fmt.Errorf("two images for architecture %s", cfg.Architecture)
		}
		seen[cfg.Architecture] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cfg.OS, Architecture: string(cfg.Architecture)},
		}})
	}
	sort.Slice(adds, func(i, j int) bool { return platformLess(adds[i].Descriptor.Platform, adds[j].Descriptor.Platform) })
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// platformLess orders platforms by os, then architecture, then variant.
func platformLess(a, b *v1.Platform) bool {
	if a.OS != b.OS {
		return a.OS < b.OS
	}
	if a.Architecture != b.Architecture {
		return a.Architecture < b.Architecture
	}
	return a.Variant < b.Variant
}

// configOf reads and checks an OS image's config.
func configOf(img v1.Image) (imageConfig, error) {
	m, err := img.Manifest()
	if err != nil {
		return imageConfig{}, err
	}
	if m.Config.MediaType != MediaTypeConfig {
		return imageConfig{}, fmt.Errorf("not an anvil OS image: config media type %q, want %q", m.Config.MediaType, MediaTypeConfig)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return imageConfig{}, err
	}
	return parseConfig(raw)
}

func parseConfig(raw []byte) (imageConfig, error) {
	var cfg imageConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return imageConfig{}, fmt.Errorf("%w: config: %v", ErrNotOSImage, err)
	}
	if !cfg.Architecture.IsKnown() {
		return imageConfig{}, fmt.Errorf("%w: config: unknown architecture %q", ErrNotOSImage, cfg.Architecture)
	}
	if cfg.OS != OS {
		return imageConfig{}, fmt.Errorf("%w: config: os %q, want %q", ErrNotOSImage, cfg.OS, OS)
	}
	if err := checkCommandLine(cfg.KernelCommandLine); err != nil {
		return imageConfig{}, fmt.Errorf("%w: config: %v", ErrNotOSImage, err)
	}
	return cfg, nil
}

// checkCommandLine refuses a kernel command line that is not one line of text: the
// runtimes pass it to QEMU's -append and into the boot configuration Ironic writes, where
// a line break would start another directive and a NUL cannot be passed at all.
func checkCommandLine(s string) error {
	if strings.ContainsAny(s, "\r\n\x00") {
		return fmt.Errorf("the kernel command line must be one line without NUL: %q", s)
	}
	return nil
}
