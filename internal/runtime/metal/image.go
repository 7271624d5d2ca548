package metal

import (
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// disk is the disk layer of one architecture's entry of an OS image.
type disk struct {
	Digest v1.Hash
	Format metalv1alpha1.ImageFormat
}

// errNoDisk: the image's entry has no disk layer (a kernel and initramfs boot VMs only).
var errNoDisk = errors.New("the image has no disk layer for bare metal: build it with a disk.raw or disk.qcow2 (osimage.FromDir)")

// diskOf is the disk layer of an image's entry.
func diskOf(e osimage.Entry) (disk, error) {
	for _, l := range e.Layers {
		switch l.MediaType {
		case osimage.MediaTypeDiskRaw:
			return disk{Digest: l.Digest, Format: metalv1alpha1.ImageFormatRaw}, nil
		case osimage.MediaTypeDiskQCOW2:
			return disk{Digest: l.Digest, Format: metalv1alpha1.ImageFormatQCOW2}, nil
		}
	}
	return disk{}, fmt.Errorf("%s, %s: %w", e.Repository, e.Architecture, errNoDisk)
}
