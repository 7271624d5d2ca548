package osimage

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// registryTransport bounds every wait on the builders' registry.
var registryTransport = registrynet.Policy{AnyAddress: true}.Transport()

// registryOptions use the manager's own credentials: every reference here (an OSImage's
// base and output) was checked to be on the builders' registry (Config.guestReference),
// the admin's, never one a tenant chose.
func registryOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(registryTransport)}
}

// errNotOSImageIndex says a reference is not an anvil OS image index.
var errNotOSImageIndex = errors.New("not an anvil OS image index")

// indexEntries resolves an OS image index: its pinned reference and the digest of each
// architecture's entry. Errors wrap osimage.ErrImageNotFound or errNotOSImageIndex.
func indexEntries(ctx context.Context, reference string) (pinned string, entries map[computev1alpha1.Architecture]string, err error) {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return "", nil, err
	}
	desc, err := remote.Get(ref, registryOptions(ctx)...)
	if err != nil {
		return "", nil, osimage.RemoteError(reference, err)
	}
	if !desc.MediaType.IsIndex() {
		return "", nil, fmt.Errorf("%s: %w: it is a single image (%s)", reference, errNotOSImageIndex, desc.MediaType)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return "", nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", nil, err
	}
	entries = map[computev1alpha1.Architecture]string{}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != osimage.OS {
			continue
		}
		entries[computev1alpha1.Architecture(d.Platform.Architecture)] = d.Digest.String()
	}
	if len(entries) == 0 {
		return "", nil, fmt.Errorf("%s: %w: no linux entries", reference, errNotOSImageIndex)
	}
	return ref.Context().Digest(desc.Digest.String()).String(), entries, nil
}

// tagDigest is the digest repository:tag names, "" when the tag does not exist.
func tagDigest(ctx context.Context, repository, tag string) (string, error) {
	ref, err := osimage.ParseReference(repository + ":" + tag)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(ref, registryOptions(ctx)...)
	if err != nil {
		if errors.Is(osimage.RemoteError(ref.String(), err), osimage.ErrImageNotFound) {
			return "", nil
		}
		return "", osimage.RemoteError(ref.String(), err)
	}
	return desc.Digest.String(), nil
}

// publishIndex assembles the index of entries (architecture to image digest, all in
// repository), pushes it by digest and moves repository:tag to it. When the tag names that
// index already, it writes nothing. It returns the index digest.
func publishIndex(ctx context.Context, repository, tag string, entries map[string]string) (string, error) {
	repo, err := osimage.ParseReference(repository + ":" + tag)
	if err != nil {
		return "", err
	}
	images := make([]v1.Image, 0, len(entries))
	for arch, digest := range entries {
		img, err := remote.Image(repo.Context().Digest(digest), registryOptions(ctx)...)
		if err != nil {
			return "", osimage.RemoteError(fmt.Sprintf("%s entry %s", arch, digest), err)
		}
		images = append(images, img)
	}
	idx, err := osimage.Index(images...)
	if err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	if current, err := tagDigest(ctx, repository, tag); err != nil {
		return "", err
	} else if current == d.String() {
		return current, nil
	}
	if _, err := osimage.Push(ctx, repo.Context().Digest(d.String()).String(), idx); err != nil {
		return "", err
	}
	// The tag moves last, and in one write: it never names a partial index.
	if err := remote.Tag(repo.(name.Tag), idx, registryOptions(ctx)...); err != nil {
		return "", osimage.RemoteError("moving "+repo.String(), err)
	}
	return d.String(), nil
}
