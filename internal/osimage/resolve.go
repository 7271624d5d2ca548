package osimage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// manifestKind tells an index from an image manifest by its mediaType field, or by its
// shape when a registry's tool left the field out.
func manifestKind(raw []byte) (types.MediaType, error) {
	var probe struct {
		MediaType types.MediaType  `json:"mediaType"`
		Manifests *json.RawMessage `json:"manifests"`
		Config    *json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	switch {
	case probe.MediaType.IsIndex() || probe.MediaType.IsImage():
		return probe.MediaType, nil
	case probe.MediaType == "" && probe.Manifests != nil:
		return types.OCIImageIndex, nil
	case probe.MediaType == "" && probe.Config != nil:
		return types.OCIManifestSchema1, nil
	}
	return "", fmt.Errorf("manifest of media type %q is neither an image nor an image index", probe.MediaType)
}

// entryFor picks the index entry of arch, or says which architectures the index offers.
func entryFor(idx *v1.IndexManifest, arch computev1alpha1.Architecture) (v1.Descriptor, error) {
	var offered []string
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == OS && d.Platform.Architecture == string(arch) {
			if !d.MediaType.IsImage() {
				return v1.Descriptor{}, fmt.Errorf("index entry for %s is a %q, not an image manifest", arch, d.MediaType)
			}
			return d, nil
		}
		offered = append(offered, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	sort.Strings(offered)
	return v1.Descriptor{}, fmt.Errorf("%w: wants %s/%s, the index offers [%s]", ErrWrongArchitecture, OS, arch, strings.Join(offered, " "))
}

// checkManifest parses an image manifest and refuses one that is not an anvil OS image.
func checkManifest(raw []byte) (*v1.Manifest, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: image manifest: %v", ErrNotOSImage, err)
	}
	if m.Config.MediaType != MediaTypeConfig {
		return nil, fmt.Errorf("%w: config media type %q, want %q", ErrNotOSImage, m.Config.MediaType, MediaTypeConfig)
	}
	if _, err := layerRoles(m.Layers); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotOSImage, err)
	}
	return m, nil
}

// layerRoles maps each layer to the Files field it fills, refusing unknown media types,
// repeated roles, and images that cannot boot (no kernel and no disk).
func layerRoles(layers []v1.Descriptor) (map[types.MediaType]v1.Descriptor, error) {
	roles := map[types.MediaType]v1.Descriptor{}
	disks := 0
	for i, l := range layers {
		switch l.MediaType {
		case MediaTypeKernel, MediaTypeInitramfs:
		case MediaTypeDiskRaw, MediaTypeDiskQCOW2:
			disks++
		default:
			return nil, fmt.Errorf("layer %d has media type %q, which anvil OS images do not use", i, l.MediaType)
		}
		if _, dup := roles[l.MediaType]; dup || disks > 1 {
			return nil, fmt.Errorf("layer %d: a second %q layer", i, l.MediaType)
		}
		if l.Size < 0 {
			return nil, fmt.Errorf("layer %d: negative size", i)
		}
		roles[l.MediaType] = l
	}
	_, kernel := roles[MediaTypeKernel]
	if !kernel && disks == 0 {
		return nil, fmt.Errorf("image has neither a kernel nor a disk layer")
	}
	if _, initramfs := roles[MediaTypeInitramfs]; initramfs && !kernel {
		return nil, fmt.Errorf("image has an initramfs but no kernel")
	}
	return roles, nil
}
