package osimage

import (
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Media types of an anvil OS image's config and layers.
const (
	MediaTypeConfig    types.MediaType = "application/vnd.anvil.os.config.v1+json"
	MediaTypeKernel    types.MediaType = "application/vnd.anvil.os.kernel.v1"
	MediaTypeInitramfs types.MediaType = "application/vnd.anvil.os.initramfs.v1"
	MediaTypeDiskRaw   types.MediaType = "application/vnd.anvil.os.disk.raw.v1"
	MediaTypeDiskQCOW2 types.MediaType = "application/vnd.anvil.os.disk.qcow2.v1"
)

// OS is the only operating system anvil images hold; it is the platform.os of index entries.
const OS = "linux"

// DiskFormat is how a disk layer's bytes are laid out.
type DiskFormat string

const (
	DiskFormatRaw   DiskFormat = "raw"
	DiskFormatQCOW2 DiskFormat = "qcow2"
)

// mediaType is the layer media type of a disk in this format.
func (f DiskFormat) mediaType() (types.MediaType, error) {
	switch f {
	case DiskFormatRaw:
		return MediaTypeDiskRaw, nil
	case DiskFormatQCOW2:
		return MediaTypeDiskQCOW2, nil
	}
	return "", fmt.Errorf("disk format %q: use %q or %q", f, DiskFormatRaw, DiskFormatQCOW2)
}

// Files is one architecture's boot artifacts as local files.
type Files struct {
	Architecture      computev1alpha1.Architecture
	Kernel            string // path, may be empty when Disk is set
	Initramfs         string // path, optional
	Disk              string // path, optional
	DiskFormat        DiskFormat
	KernelCommandLine string
	// Annotations of the image manifest (an image build's LABELs), optional.
	Annotations map[string]string
}

// imageConfig is the JSON of the config blob. Architecture and OS use the names of the
// OCI image config so generic tools (and imageref) read them without knowing anvil.
type imageConfig struct {
	Architecture      computev1alpha1.Architecture `json:"architecture"`
	OS                string                       `json:"os"`
	KernelCommandLine string                       `json:"kernelCommandLine,omitempty"`
}

var (
	// ErrWrongArchitecture means the image has no entry for the architecture asked for.
	ErrWrongArchitecture = errors.New("image has no entry for this architecture")
	// ErrImageNotFound means the reference or digest does not exist in the registry.
	ErrImageNotFound = errors.New("image not found")
	// ErrNotOSImage means the manifest or config is not an anvil OS image's.
	ErrNotOSImage = errors.New("not an anvil OS image")
	// ErrBadReference means the reference or digest does not parse.
	ErrBadReference = errors.New("malformed image reference")
	// ErrTooLarge means a layer is larger than the cache accepts.
	ErrTooLarge = errors.New("layer too large")
)
