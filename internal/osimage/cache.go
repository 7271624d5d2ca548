package osimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// maxMetadata bounds the manifests and configs read into memory from a registry.
const maxMetadata = 4 << 20

// DefaultMaxLayerBytes bounds one layer when CacheOptions set no limit.
const DefaultMaxLayerBytes = 16 << 30

// CacheOptions limit what a Cache fetches and keeps. The zero value is safe: default
// timeouts and layer limit, non-public registries refused, no eviction.
type CacheOptions struct {
	// Network is how registries are reached (timeouts, allowed addresses).
	Network registrynet.Policy
	// Keychain holds the credentials pulls present; nil pulls anonymously, as a runtime
	// pulling for tenants must (never the host's keychain). The build agent, inside a
	// tenant's builder guest, gives the tenant's own (its job's registry Secrets).
	Keychain authn.Keychain
	// MaxLayerBytes refuses a layer (a kernel, an initramfs, a disk) a manifest says is
	// larger, before any of it is fetched (0: DefaultMaxLayerBytes).
	MaxLayerBytes int64
	// MaxBytes, when positive, is the size the cache is brought back under after each
	// pull, by evicting the images no machine uses, least recently used first.
	MaxBytes int64
	// KeepRecent protects an image used this recently from eviction (0: a minute), so
	// an image a runtime has just pulled, and not yet recorded as in use, stays.
	KeepRecent time.Duration
}

// Cache is a content-addressed store of pulled layers shared by every VM of a runtime.
// Manifests and configs are stored beside the layers, so pulling a digest already in the
// cache asks no registry anything. One folder belongs to one Cache at a time.
//
// It pulls anonymously unless given a keychain: it runs on a host for tenants, and must
// never lend them the host's registry credentials.
type Cache struct {
	store  *store
	puller *remote.Puller
	opts   CacheOptions
	images *imageLog
}

// NewCache opens (creating if needed) the cache in dir, dropping writes left unfinished
// by a crash.
func NewCache(dir string, opts CacheOptions) (*Cache, error) {
	if opts.MaxLayerBytes <= 0 {
		opts.MaxLayerBytes = DefaultMaxLayerBytes
	}
	if opts.KeepRecent <= 0 {
		opts.KeepRecent = time.Minute
	}
	s, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	images, err := openImageLog(dir)
	if err != nil {
		return nil, err
	}
	auth := remote.WithAuth(authn.Anonymous)
	if opts.Keychain != nil {
		auth = remote.WithAuthFromKeychain(opts.Keychain)
	}
	p, err := remote.NewPuller(remote.WithTransport(opts.Network.Transport()), auth)
	if err != nil {
		return nil, err
	}
	return &Cache{store: s, puller: p, opts: opts, images: images}, nil
}

// Entry is one architecture's image of an OS image, as its manifests say: enough for a
// runtime to refuse an image (no such architecture, no disk) before pulling any layer.
type Entry struct {
	Repository        name.Repository
	Architecture      computev1alpha1.Architecture
	KernelCommandLine string
	// Layers are the image manifest's layers, each with an anvil media type.
	Layers []v1.Descriptor

	// key names the image in the cache's records; blobs are the manifests and config
	// read to find it.
	key   string
	blobs []string
}

// Entry reads (from the cache when it has them) the manifests and config of the entry of
// arch of the image reference pinned to digest (an index's or a single image's). An empty
// digest takes the one in the reference, or resolves its tag. Errors wrap
// ErrImageNotFound, ErrWrongArchitecture, ErrNotOSImage or ErrBadReference when they are
// one of those.
func (c *Cache) Entry(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (Entry, error) {
	if !arch.IsKnown() {
		return Entry{}, fmt.Errorf("architecture %q: use one of %v", arch, computev1alpha1.KnownArchitectures)
	}
	ref, err := ParseReference(reference)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrBadReference, err)
	}
	repo := ref.Context()
	top, err := c.topLevel(ctx, ref, digest)
	if err != nil {
		return Entry{}, err
	}
	raw, err := c.manifest(ctx, repo, top, -1)
	if err != nil {
		return Entry{}, err
	}
	kind, err := manifestKind(raw)
	if err != nil {
		return Entry{}, fmt.Errorf("%s@%s: %w: %v", repo, top, ErrNotOSImage, err)
	}
	fromIndex := kind.IsIndex()
	if fromIndex {
		idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return Entry{}, fmt.Errorf("%s@%s: image index: %w", repo, top, err)
		}
		entry, err := entryFor(idx, arch)
		if err != nil {
			return Entry{}, fmt.Errorf("%s@%s: %w", repo, top, err)
		}
		if raw, err = c.manifest(ctx, repo, entry.Digest, entry.Size); err != nil {
			return Entry{}, err
		}
		if kind, err = manifestKind(raw); err != nil || !kind.IsImage() {
			return Entry{}, fmt.Errorf("%s@%s: %w: index entry for %s is not an image manifest", repo, entry.Digest, ErrNotOSImage, arch)
		}
	}
	e, err := c.entry(ctx, repo, raw)
	if err != nil {
		return Entry{}, fmt.Errorf("%s@%s: %w", repo, top, err)
	}
	e.key = top.Hex + "-" + string(arch)
	e.blobs = append(e.blobs, top.Hex)
	if fromIndex {
		e.blobs = append(e.blobs, digestOf(raw).Hex)
	}
	if e.Architecture != arch {
		if fromIndex {
			return Entry{}, fmt.Errorf("%s@%s: the index entry for %s holds a %s image", repo, top, arch, e.Architecture)
		}
		return Entry{}, fmt.Errorf("%s@%s: %w: wants %s, the image is %s", repo, top, ErrWrongArchitecture, arch, e.Architecture)
	}
	return e, nil
}

// Pull fetches (once, even when called concurrently) the layers of the entry Entry names
// and returns its files as paths inside the cache (callers must not modify them). A qcow2
// disk whose header names another file is refused with ErrUnsafeDisk.
//
// With CacheOptions.MaxBytes set, each pull ends by evicting images no machine uses.
func (c *Cache) Pull(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (Files, error) {
	files, err := c.pull(ctx, reference, digest, arch)
	if err := c.evict(ctx); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Image cache eviction failed")
	}
	return files, err
}

func (c *Cache) pull(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (Files, error) {
	e, err := c.Entry(ctx, reference, digest, arch)
	if err != nil {
		return Files{}, err
	}
	blobs := e.blobs
	for _, l := range e.Layers {
		// Refused on the manifest's word, before any byte: the store then refuses a
		// registry that sends more than the manifest said.
		if l.Size > c.opts.MaxLayerBytes {
			return Files{}, fmt.Errorf("%s: layer %s: %w: %d bytes, the pool's limit is %d (--max-layer-size)", reference, l.Digest, ErrTooLarge, l.Size, c.opts.MaxLayerBytes)
		}
		blobs = append(blobs, l.Digest.Hex)
	}
	// Active and recorded before any layer is fetched, so eviction keeps what it reads.
	// (A manifest evicted while Entry read it fails this pull; the runtime pulls again.)
	done := c.images.begin(e.key)
	defer done()
	if err := c.images.record(e.key, reference, blobs); err != nil {
		return Files{}, fmt.Errorf("image cache: %w", err)
	}
	files := Files{Architecture: e.Architecture, KernelCommandLine: e.KernelCommandLine}
	for _, l := range e.Layers {
		p, err := c.blob(ctx, e.Repository, l)
		if err != nil {
			return Files{}, fmt.Errorf("%s: %w", reference, err)
		}
		switch l.MediaType {
		case MediaTypeKernel:
			files.Kernel = p
		case MediaTypeInitramfs:
			files.Initramfs = p
		case MediaTypeDiskRaw:
			files.Disk, files.DiskFormat = p, DiskFormatRaw
		case MediaTypeDiskQCOW2:
			// Checked at every pull, not only the first: the cache may be older than
			// this check.
			if err := CheckQCOW2File(p); err != nil {
				return Files{}, fmt.Errorf("%s: disk layer %s: %w", reference, l.Digest, err)
			}
			files.Disk, files.DiskFormat = p, DiskFormatQCOW2
		}
	}
	// Last use is the end of the pull: a long pull is not "least recently used".
	if err := c.images.record(e.key, reference, blobs); err != nil {
		return Files{}, fmt.Errorf("image cache: %w", err)
	}
	return files, nil
}

// digestOf is the sha256 digest of bytes already checked against it by the store.
func digestOf(b []byte) v1.Hash {
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h
}

// topLevel is the digest to pull: the one asked for, the reference's own, or its tag's.
func (c *Cache) topLevel(ctx context.Context, ref name.Reference, digest string) (v1.Hash, error) {
	pinned, isDigest := ref.(name.Digest)
	switch {
	case digest != "" && isDigest && pinned.DigestStr() != digest:
		return v1.Hash{}, fmt.Errorf("reference %s and digest %s disagree", ref, digest)
	case digest != "":
		return v1.NewHash(digest)
	case isDigest:
		return v1.NewHash(pinned.DigestStr())
	}
	desc, err := c.puller.Get(ctx, ref)
	if err != nil {
		return v1.Hash{}, RemoteError(ref.String(), err)
	}
	if len(desc.Manifest) > maxMetadata {
		return v1.Hash{}, fmt.Errorf("%s: manifest of %d bytes is too large", ref, len(desc.Manifest))
	}
	if ok, err := c.store.has(desc.Digest); err != nil || ok {
		return desc.Digest, err
	}
	if err := c.store.write(desc.Digest, int64(len(desc.Manifest)), bytes.NewReader(desc.Manifest)); err != nil {
		return v1.Hash{}, err
	}
	return desc.Digest, nil
}

// manifest returns the bytes of the manifest with digest h, from the cache or the registry.
func (c *Cache) manifest(ctx context.Context, repo name.Repository, h v1.Hash, size int64) ([]byte, error) {
	if size > maxMetadata {
		return nil, fmt.Errorf("manifest %s: %d bytes is too large", h, size)
	}
	p, _, err := c.store.ensure(ctx, h, size, func(ctx context.Context) (io.ReadCloser, error) {
		desc, err := c.puller.Get(ctx, repo.Digest(h.String()))
		if err != nil {
			return nil, RemoteError(repo.String()+"@"+h.String(), err)
		}
		if len(desc.Manifest) > maxMetadata {
			return nil, fmt.Errorf("manifest %s: %d bytes is too large", h, len(desc.Manifest))
		}
		return io.NopCloser(bytes.NewReader(desc.Manifest)), nil
	})
	if err != nil {
		return nil, err
	}
	return readSmall(p)
}

// entry checks an image manifest and reads its config (a small blob, kept in the cache).
func (c *Cache) entry(ctx context.Context, repo name.Repository, raw []byte) (Entry, error) {
	m, err := checkManifest(raw)
	if err != nil {
		return Entry{}, err
	}
	if m.Config.Size > maxMetadata {
		return Entry{}, fmt.Errorf("config of %d bytes is too large", m.Config.Size)
	}
	cfgPath, err := c.blob(ctx, repo, m.Config)
	if err != nil {
		return Entry{}, err
	}
	rawCfg, err := readSmall(cfgPath)
	if err != nil {
		return Entry{}, err
	}
	cfg, err := parseConfig(rawCfg)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Repository: repo, Architecture: cfg.Architecture, KernelCommandLine: cfg.KernelCommandLine, Layers: m.Layers,
		blobs: []string{m.Config.Digest.Hex}}, nil
}

// blob makes the blob of a descriptor present in the cache and returns its path.
func (c *Cache) blob(ctx context.Context, repo name.Repository, d v1.Descriptor) (string, error) {
	start := time.Now()
	p, fetched, err := c.store.ensure(ctx, d.Digest, d.Size, func(ctx context.Context) (io.ReadCloser, error) {
		l, err := c.puller.Layer(ctx, repo.Digest(d.Digest.String()))
		if err != nil {
			return nil, RemoteError(repo.String()+"@"+d.Digest.String(), err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, RemoteError(repo.String()+"@"+d.Digest.String(), err)
		}
		return rc, nil
	})
	if err != nil {
		return "", err
	}
	if fetched {
		logr.FromContextOrDiscard(ctx).V(1).Info("Pulled blob", "repository", repo.String(), "digest", d.Digest.String(),
			"mediaType", string(d.MediaType), "bytes", d.Size, "duration", time.Since(start))
	}
	return p, nil
}

// RemoteError marks the registry's "no such manifest/blob/repository" as ErrImageNotFound.
func RemoteError(what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		notFound := te.StatusCode == 404
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				notFound = true
			}
		}
		if notFound {
			return fmt.Errorf("%s: %w: %w", what, ErrImageNotFound, err)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// readSmall reads a cached manifest or config, which were size-checked on the way in.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetadata+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetadata {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxMetadata)
	}
	return b, nil
}
