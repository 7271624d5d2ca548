package imageref

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// Registry reads image manifests, anonymously, caching answers: forever for digest
// references (they cannot change), for TagTTL for tags.
type Registry struct {
	TagTTL time.Duration
	// Transport reaches registries (nil: registrynet's timeouts and address rules, no
	// registry allow-listed). A runtime passes its image cache's, so both refuse the same
	// registries; the manager and poollets pass one made from their --allow-registry.
	Transport http.RoundTripper

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	digest      string
	archs       []computev1alpha1.Architecture
	annotations map[string]string
	at          time.Time
}

// Digest returns the digest the reference points at: the index's for a multi-arch image.
func (r *Registry) Digest(ctx context.Context, reference string) (string, error) {
	e, err := r.lookup(ctx, reference)
	return e.digest, err
}

// Architectures returns what the image offers: the platforms of an index's entries, or
// the architecture in a single image's config.
func (r *Registry) Architectures(ctx context.Context, reference string) ([]computev1alpha1.Architecture, error) {
	e, err := r.lookup(ctx, reference)
	return e.archs, err
}

// Annotations returns what the image says of itself: its index's annotations, or a single
// image's manifest's (never nil without an error).
func (r *Registry) Annotations(ctx context.Context, reference string) (map[string]string, error) {
	e, err := r.lookup(ctx, reference)
	if err != nil {
		return nil, err
	}
	if e.annotations == nil {
		return map[string]string{}, nil
	}
	return maps.Clone(e.annotations), nil // the cache's own stays unchanged
}

func (r *Registry) lookup(ctx context.Context, reference string) (entry, error) {
	r.mu.Lock()
	e, ok := r.cache[reference]
	r.mu.Unlock()
	pinned := strings.Contains(reference, "@")
	if ok && (pinned || time.Since(e.at) < r.TagTTL) {
		return e, nil
	}
	e, err := fetch(ctx, reference, r.transport())
	if err != nil {
		return entry{}, err
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = map[string]entry{}
	}
	r.cache[reference] = e
	r.mu.Unlock()
	return e, nil
}

// defaultTransport bounds every wait and refuses loopback, link-local and private
// registries: the references are tenants', and the manager and poollets reading them sit
// inside the site (an etcd on 127.0.0.1, a metadata service on 169.254.169.254).
var defaultTransport = registrynet.Policy{}.Transport()

func (r *Registry) transport() http.RoundTripper {
	if r.Transport != nil {
		return r.Transport
	}
	return defaultTransport
}

func fetch(ctx context.Context, reference string, transport http.RoundTripper) (entry, error) {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return entry{}, err
	}
	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithTransport(transport), remote.WithAuth(authn.Anonymous))
	if err != nil {
		return entry{}, fmt.Errorf("reading image %s: %w", reference, err)
	}
	e := entry{digest: desc.Digest.String(), at: time.Now()}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return entry{}, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return entry{}, err
		}
		e.annotations = m.Annotations
		for _, d := range m.Manifests {
			if d.Platform != nil && computev1alpha1.Architecture(d.Platform.Architecture).IsKnown() {
				e.archs = append(e.archs, computev1alpha1.Architecture(d.Platform.Architecture))
			}
		}
		return e, nil
	}
	img, err := desc.Image()
	if err != nil {
		return entry{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return entry{}, err
	}
	if a := computev1alpha1.Architecture(cfg.Architecture); a.IsKnown() {
		e.archs = []computev1alpha1.Architecture{a}
	}
	m, err := img.Manifest()
	if err != nil {
		return entry{}, err
	}
	e.annotations = m.Annotations
	return e, nil
}
