package osimage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Build makes one architecture's OS image from local files. The image holds no
// timestamps, so the same files always give the same digest.
func Build(f Files) (v1.Image, error) {
	if !f.Architecture.IsKnown() {
		return nil, fmt.Errorf("architecture %q: use one of %v", f.Architecture, computev1alpha1.KnownArchitectures)
	}
	if f.Kernel == "" && f.Disk == "" {
		return nil, fmt.Errorf("%s image: needs a kernel, a disk or both", f.Architecture)
	}
	if err := checkCommandLine(f.KernelCommandLine); err != nil {
		return nil, fmt.Errorf("%s image: %w", f.Architecture, err)
	}
	type part struct {
		path, title string
		mediaType   types.MediaType
	}
	var parts []part
	if f.Kernel != "" {
		parts = append(parts, part{f.Kernel, "kernel", MediaTypeKernel})
	}
	if f.Initramfs != "" {
		if f.Kernel == "" {
			return nil, fmt.Errorf("%s image: an initramfs needs a kernel", f.Architecture)
		}
		parts = append(parts, part{f.Initramfs, "initramfs", MediaTypeInitramfs})
	}
	if f.Disk != "" {
		mt, err := f.DiskFormat.mediaType()
		if err != nil {
			return nil, fmt.Errorf("%s image: %w", f.Architecture, err)
		}
		if err := checkDiskFormat(f.Disk, f.DiskFormat); err != nil {
			return nil, fmt.Errorf("%s image: %w", f.Architecture, err)
		}
		parts = append(parts, part{f.Disk, "disk." + string(f.DiskFormat), mt})
	}

	img := &image{}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Layers: []v1.Descriptor{}}
	if len(f.Annotations) > 0 {
		m.Annotations = f.Annotations // JSON sorts map keys: the digest stays a function of the files
	}
	for _, p := range parts {
		l, err := newFileLayer(p.path, p.mediaType)
		if err != nil {
			return nil, fmt.Errorf("%s image: %s: %w", f.Architecture, p.title, err)
		}
		img.layers = append(img.layers, l)
		m.Layers = append(m.Layers, l.descriptor(p.title))
	}
	var err error
	img.config, err = json.Marshal(imageConfig{Architecture: f.Architecture, OS: OS, KernelCommandLine: f.KernelCommandLine})
	if err != nil {
		return nil, err
	}
	cfgDigest, cfgSize, err := v1.SHA256(bytes.NewReader(img.config))
	if err != nil {
		return nil, err
	}
	m.Config = v1.Descriptor{MediaType: MediaTypeConfig, Size: cfgSize, Digest: cfgDigest}
	if img.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}

// checkDiskFormat refuses a disk whose first bytes contradict its declared format.
func checkDiskFormat(path string, format DiskFormat) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(qcow2Magic))
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	isQCOW2 := n == len(head) && bytes.Equal(head, qcow2Magic)
	switch {
	case format == DiskFormatQCOW2 && !isQCOW2:
		return fmt.Errorf("disk %s is declared qcow2 but is not a qcow2 file", path)
	case format == DiskFormatRaw && isQCOW2:
		return fmt.Errorf("disk %s is declared raw but is a qcow2 file", path)
	case isQCOW2:
		if err := CheckQCOW2File(path); err != nil {
			return fmt.Errorf("disk %s: %w", path, err)
		}
	}
	return nil
}

// image is a built OS image: its manifest and config are fixed bytes, its layers files.
type image struct {
	config   []byte
	manifest []byte
	layers   []*fileLayer
}

func (i *image) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *image) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (i *image) RawManifest() ([]byte, error)        { return i.manifest, nil }

func (i *image) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range i.layers {
		if l.digest == h {
			return l, nil
		}
	}
	if cfg, err := partial.ConfigLayer(i); err == nil {
		if d, _ := cfg.Digest(); d == h {
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("image has no blob %s", h)
}
