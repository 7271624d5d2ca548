package containerimage

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layer is a layer to put into an image: its entries and what made it (the history's
// created_by, e.g. "anvil binary" or the Debian packages' lock file).
type Layer struct {
	Entries   []Entry
	CreatedBy string
}

// WriteLayer writes l as a gzip-compressed tar into dir (named by its content, so equal
// layers of several images are written once) and returns it as an OCI layer.
func WriteLayer(dir string, l Layer, src Source) (v1.Layer, error) {
	f, err := os.CreateTemp(dir, ".layer-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// gzip's header carries no name or time unless asked, so the same tar compresses to
	// the same bytes (with the same Go release).
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := WriteTar(zw, l.Entries, src.Created); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	digest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, digest.Hex+".tar.gz")
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer))
}

// Image is an OCI image of cfg with layers, in order; each layer's history entry is dated
// cfg.Created.
func Image(cfg v1.ConfigFile, layers []v1.Layer, createdBy []string) (v1.Image, error) {
	if len(layers) != len(createdBy) {
		return nil, fmt.Errorf("%d layers with %d history entries", len(layers), len(createdBy))
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, &cfg)
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: cfg.Created, CreatedBy: createdBy[i]}}
	}
	return mutate.Append(img, adds...)
}

// Index is an OCI image index of images, one per platform, ordered by architecture so that
// the order they were built in does not change the digest, annotated with annotations.
func Index(images map[string]v1.Image, annotations map[string]string) (v1.ImageIndex, error) {
	archs := make([]string, 0, len(images))
	for a := range images {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	adds := make([]mutate.IndexAddendum, 0, len(archs))
	for _, a := range archs {
		desc, err := imageDescriptor(images[a], a)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: images[a], Descriptor: desc})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, annotations).(v1.ImageIndex), nil
}

func imageDescriptor(img v1.Image, arch string) (v1.Descriptor, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if cfg.Architecture != arch || cfg.OS != "linux" {
		return v1.Descriptor{}, fmt.Errorf("image for %s is %s/%s", arch, cfg.OS, cfg.Architecture)
	}
	return v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: arch}}, nil
}
