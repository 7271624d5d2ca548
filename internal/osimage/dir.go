package osimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// The files FromDir reads from an architecture's folder.
const (
	KernelFile    = "kernel"
	InitramfsFile = "initramfs"
	DiskRawFile   = "disk.raw"
	DiskQCOW2File = "disk.qcow2"
	CmdlineFile   = "cmdline"
)

// FromDir names the boot artifacts in dir. A file it does not know is an error, so a
// misnamed initramfs is not silently left out of the image.
func FromDir(arch computev1alpha1.Architecture, dir string) (Files, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Files{}, fmt.Errorf("%s: %w", arch, err)
	}
	f := Files{Architecture: arch}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		switch e.Name() {
		case KernelFile:
			f.Kernel = p
		case InitramfsFile:
			f.Initramfs = p
		case DiskRawFile, DiskQCOW2File:
			if f.Disk != "" {
				return Files{}, fmt.Errorf("%s: %s holds both %s and %s; keep one", arch, dir, DiskRawFile, DiskQCOW2File)
			}
			f.Disk, f.DiskFormat = p, DiskFormatRaw
			if e.Name() == DiskQCOW2File {
				f.DiskFormat = DiskFormatQCOW2
			}
		case CmdlineFile:
			if f.KernelCommandLine, err = readCmdline(p); err != nil {
				return Files{}, fmt.Errorf("%s: %w", arch, err)
			}
		default:
			return Files{}, fmt.Errorf("%s: %s holds %q; expected only %s, %s, %s or %s, and %s",
				arch, dir, e.Name(), KernelFile, InitramfsFile, DiskRawFile, DiskQCOW2File, CmdlineFile)
		}
	}
	if f.Kernel == "" && f.Disk == "" {
		return Files{}, fmt.Errorf("%s: %s has no %s and no %s or %s; an OS image needs a kernel, a disk or both",
			arch, dir, KernelFile, DiskRawFile, DiskQCOW2File)
	}
	return f, nil
}

// readCmdline reads a one-line kernel command line; a final newline is not part of it.
func readCmdline(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line := strings.TrimRight(string(b), "\r\n")
	if strings.ContainsAny(line, "\r\n") {
		return "", fmt.Errorf("%s: the kernel command line must be one line", path)
	}
	return strings.TrimSpace(line), nil
}

// PushDirs builds one image per architecture from its folder (see FromDir), assembles the
// index and pushes it to reference, with annotations (may be nil) on the index and on each
// image's manifest: what the image says of itself, such as the Kubernetes version of a node
// image (Machines' requiredImageAnnotations). It returns the repository pinned to the index
// digest (REPOSITORY@sha256:...) and each architecture's image digest.
func PushDirs(ctx context.Context, reference string, sources map[computev1alpha1.Architecture]string, annotations map[string]string) (string, map[computev1alpha1.Architecture]v1.Hash, error) {
	ref, err := ParseReference(reference)
	if err != nil {
		return "", nil, err
	}
	archs := make([]computev1alpha1.Architecture, 0, len(sources))
	for a := range sources {
		archs = append(archs, a)
	}
	sort.Slice(archs, func(i, j int) bool { return archs[i] < archs[j] })
	images := make([]v1.Image, 0, len(archs))
	digests := map[computev1alpha1.Architecture]v1.Hash{}
	for _, arch := range archs {
		files, err := FromDir(arch, sources[arch])
		if err != nil {
			return "", nil, err
		}
		files.Annotations = annotations
		img, err := Build(files)
		if err != nil {
			return "", nil, err
		}
		if digests[arch], err = img.Digest(); err != nil {
			return "", nil, err
		}
		images = append(images, img)
	}
	idx, err := Index(images...)
	if err != nil {
		return "", nil, err
	}
	if len(annotations) > 0 {
		idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)
	}
	digest, err := Push(ctx, reference, idx)
	if err != nil {
		return "", nil, err
	}
	return pinned(ref, digest), digests, nil
}

// pinned is the reference's repository at digest.
func pinned(ref name.Reference, digest string) string {
	return ref.Context().Name() + "@" + digest
}
