package containerimage

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/internal/osimage"
)

// refNameAnnotation names an index inside an OCI image layout (image-spec image-layout.md).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout replaces dir with an OCI image layout holding idx, named tag.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout is the one index of the OCI image layout at dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image layout %s holds %d entries, not one index", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// Push writes idx and everything it holds to the registry as reference (registry/repo:tag).
// Registries on loopback are spoken to over plain HTTP, every other over HTTPS; credentials
// come from the docker config DOCKER_CONFIG names (or ~/.docker/config.json).
func Push(ctx context.Context, idx v1.ImageIndex, reference string) error {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", reference, err)
	}
	return nil
}

// LayoutTag is the name WriteLayout gave the one index of the OCI image layout at dir.
func LayoutTag(dir string) (string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("image layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[refNameAnnotation] == "" {
		return "", fmt.Errorf("image layout %s does not hold one named index", dir)
	}
	return m.Manifests[0].Annotations[refNameAnnotation], nil
}
