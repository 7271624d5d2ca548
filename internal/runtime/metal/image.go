package metal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// disk is the disk layer of one architecture's entry of an OS image.
type disk struct {
	Digest v1.Hash
	Format metalv1alpha1.ImageFormat
}

// Errors of images that no retry can fix: the create is INVALID.
var (
	// errNoDisk: the image's entry has no disk layer (a kernel and initramfs boot VMs only).
	errNoDisk = errors.New("the image has no disk layer for bare metal: build it with a disk.raw or disk.qcow2 (osimage.FromDir)")
	// errNotOSImage: the manifest is not an anvil OS image.
	errNotOSImage = errors.New("not an anvil OS image")
	// errBadReference: the reference or digest does not parse.
	errBadReference = errors.New("malformed image reference")
)

// diskResolver finds the disk layer of an image's entry for an architecture.
type diskResolver interface {
	Disk(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (disk, error)
}

// registryDisks reads manifests only (an index and one image manifest), so a create
// learns the disk's digest and format in two small reads; the disk itself is pulled into
// the cache afterwards. Answers are kept: an image pinned to a digest never changes.
type registryDisks struct {
	mu    sync.Mutex
	known map[string]disk
}

// maxKnown bounds the answers kept; past it they are dropped and read again.
const maxKnown = 1024

func (r *registryDisks) Disk(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (disk, error) {
	key := reference + "@" + digest + "/" + string(arch)
	r.mu.Lock()
	d, ok := r.known[key]
	r.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := readDisk(ctx, reference, digest, arch)
	if err != nil {
		return disk{}, err
	}
	r.mu.Lock()
	if r.known == nil || len(r.known) >= maxKnown {
		r.known = map[string]disk{}
	}
	r.known[key] = d
	r.mu.Unlock()
	return d, nil
}

func readDisk(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (disk, error) {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return disk{}, fmt.Errorf("%w: %v", errBadReference, err)
	}
	if _, err := v1.NewHash(digest); err != nil {
		return disk{}, fmt.Errorf("%w: digest %q: %v", errBadReference, digest, err)
	}
	pinned := ref.Context().Digest(digest)
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	desc, err := remote.Get(pinned, ropts...)
	if err != nil {
		return disk{}, osimage.RemoteError(pinned.String(), err)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return disk{}, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return disk{}, fmt.Errorf("%s: image index: %w", pinned, err)
		}
		entry, err := entryFor(m, arch)
		if err != nil {
			return disk{}, fmt.Errorf("%s: %w", pinned, err)
		}
		if img, err = remote.Image(ref.Context().Digest(entry.String()), ropts...); err != nil {
			return disk{}, osimage.RemoteError(pinned.String(), err)
		}
	} else {
		if img, err = desc.Image(); err != nil {
			return disk{}, err
		}
		raw, err := img.RawConfigFile()
		if err != nil {
			return disk{}, osimage.RemoteError(pinned.String(), err)
		}
		var cfg struct {
			Architecture computev1alpha1.Architecture `json:"architecture"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return disk{}, fmt.Errorf("%s: image config: %w", pinned, err)
		}
		if cfg.Architecture != arch {
			return disk{}, fmt.Errorf("%s: %w: wants %s, the image is %s", pinned, osimage.ErrWrongArchitecture, arch, cfg.Architecture)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		return disk{}, osimage.RemoteError(pinned.String(), err)
	}
	if m.Config.MediaType != osimage.MediaTypeConfig {
		return disk{}, fmt.Errorf("%s: %w (config media type %q)", pinned, errNotOSImage, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		switch l.MediaType {
		case osimage.MediaTypeDiskRaw:
			return disk{Digest: l.Digest, Format: metalv1alpha1.ImageFormatRaw}, nil
		case osimage.MediaTypeDiskQCOW2:
			return disk{Digest: l.Digest, Format: metalv1alpha1.ImageFormatQCOW2}, nil
		}
	}
	return disk{}, fmt.Errorf("%s, %s: %w", pinned, arch, errNoDisk)
}

// entryFor is the digest of the index entry for arch, or ErrWrongArchitecture naming
// what the index offers.
func entryFor(idx *v1.IndexManifest, arch computev1alpha1.Architecture) (v1.Hash, error) {
	var offered []string
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == osimage.OS && d.Platform.Architecture == string(arch) {
			return d.Digest, nil
		}
		offered = append(offered, d.Platform.Architecture)
	}
	sort.Strings(offered)
	return v1.Hash{}, fmt.Errorf("%w: wants %s, the index offers [%s]", osimage.ErrWrongArchitecture, arch, strings.Join(offered, " "))
}
