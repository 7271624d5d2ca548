package metal

import (
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// bootFiles is what a Host is given of one architecture's entry of an OS image: its disk
// layer, written to the server's disk; or, for an entry without one, its kernel and
// initramfs, booted from RAM with the image's command line.
type bootFiles struct {
	Disk       v1.Hash
	DiskFormat metalv1alpha1.ImageFormat
	Kernel     v1.Hash
	Initramfs  v1.Hash
	// CommandLine is the kernel's, from the image's config.
	CommandLine string
}

// errNotBootable: the entry has neither a disk layer nor a kernel and an initramfs.
var errNotBootable = errors.New("the image has no disk layer and no kernel with an initramfs: a server has nothing to boot")

// bootFilesOf finds in an entry what a server boots: the disk layer when there is one,
// else the kernel and initramfs.
func bootFilesOf(e osimage.Entry) (bootFiles, error) {
	var b bootFiles
	for _, l := range e.Layers {
		switch l.MediaType {
		case osimage.MediaTypeDiskRaw:
			return bootFiles{Disk: l.Digest, DiskFormat: metalv1alpha1.ImageFormatRaw}, nil
		case osimage.MediaTypeDiskQCOW2:
			return bootFiles{Disk: l.Digest, DiskFormat: metalv1alpha1.ImageFormatQCOW2}, nil
		case osimage.MediaTypeKernel:
			b.Kernel = l.Digest
		case osimage.MediaTypeInitramfs:
			b.Initramfs = l.Digest
		}
	}
	if b.Kernel.Hex == "" || b.Initramfs.Hex == "" {
		return bootFiles{}, fmt.Errorf("%s, %s: %w", e.Repository, e.Architecture, errNotBootable)
	}
	b.CommandLine = e.KernelCommandLine
	return b, nil
}

// hostImage is the Host's spec.image for b, each file served at url(hex).
func (b bootFiles) hostImage(url func(hex string) string) *metalv1alpha1.HostImage {
	if b.Disk.Hex != "" {
		return &metalv1alpha1.HostImage{URL: url(b.Disk.Hex), Checksum: b.Disk.String(), Format: b.DiskFormat}
	}
	return &metalv1alpha1.HostImage{
		Kernel:          &metalv1alpha1.BootFile{URL: url(b.Kernel.Hex), Checksum: b.Kernel.String()},
		Initramfs:       &metalv1alpha1.BootFile{URL: url(b.Initramfs.Hex), Checksum: b.Initramfs.String()},
		KernelArguments: b.CommandLine,
	}
}

// checksums are the sha256 checksums of the files of img the image server may serve.
func checksums(img *metalv1alpha1.HostImage) []string {
	switch {
	case img == nil:
		return nil
	case img.Ramdisk():
		out := []string{img.Kernel.Checksum}
		if img.Initramfs != nil {
			out = append(out, img.Initramfs.Checksum)
		}
		return out
	}
	return []string{img.Checksum}
}
