package osimage

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/qcow2"
)

// baseRoot is what a base's architecture entry gives a build to start from.
type baseRoot struct {
	// kernel: the entry has a kernel layer (its images boot it, or the one a step installs).
	kernel bool
	// diskBytes is its disk root's size (the qcow2's virtual size, or the raw disk's); 0
	// when its root is an initramfs.
	diskBytes int64
}

// rootDiskAlign rounds a builder's scratch disk up: sizes the runtimes' disks take as they
// are.
const rootDiskAlign = 1 << 20

// scratchDiskBytes is the size of the blank disk a builder needs for a disk root of n
// bytes: the root's own size (its filesystem is not grown), rounded up.
func scratchDiskBytes(n int64) int64 {
	return (n + rootDiskAlign - 1) / rootDiskAlign * rootDiskAlign
}

// baseRoots remembers each entry read: an entry is named by its digest, so what it holds
// never changes, and an OSImage's reconcile asks the registry nothing new for it.
type baseRoots struct {
	mu   sync.Mutex
	seen map[string]baseRoot
}

// maxBaseRoots bounds the memory: past it, the entries are read again.
const maxBaseRoots = 1024

// read returns what the entry repository@digest holds.
func (m *baseRoots) read(ctx context.Context, repository, digest string) (baseRoot, error) {
	key := repository + "@" + digest
	m.mu.Lock()
	root, ok := m.seen[key]
	m.mu.Unlock()
	if ok {
		return root, nil
	}
	root, err := readBaseRoot(ctx, repository, digest)
	if err != nil {
		return baseRoot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil || len(m.seen) >= maxBaseRoots {
		m.seen = map[string]baseRoot{}
	}
	m.seen[key] = root
	return root, nil
}

// readBaseRoot reads an entry's manifest and, for a qcow2 disk, the disk's header.
func readBaseRoot(ctx context.Context, repository, digest string) (baseRoot, error) {
	ref, err := osimage.ParseReference(repository + "@" + digest)
	if err != nil {
		return baseRoot{}, err
	}
	img, err := remote.Image(ref, registryOptions(ctx)...)
	if err != nil {
		return baseRoot{}, osimage.RemoteError(ref.String(), err)
	}
	m, err := img.Manifest()
	if err != nil {
		return baseRoot{}, err
	}
	var root baseRoot
	for _, l := range m.Layers {
		switch l.MediaType {
		case osimage.MediaTypeKernel:
			root.kernel = true
		case osimage.MediaTypeDiskRaw:
			root.diskBytes = l.Size
		case osimage.MediaTypeDiskQCOW2:
			layer, err := remote.Layer(ref.Context().Digest(l.Digest.String()), registryOptions(ctx)...)
			if err != nil {
				return baseRoot{}, err
			}
			rc, err := layer.Compressed()
			if err != nil {
				return baseRoot{}, osimage.RemoteError(ref.String()+" disk", err)
			}
			head := make([]byte, 32)
			_, err = io.ReadFull(rc, head)
			rc.Close() // the header is all it needs of the disk
			if err != nil {
				return baseRoot{}, fmt.Errorf("%s: reading the disk's header: %w", ref, err)
			}
			if root.diskBytes, err = qcow2.VirtualSize(head); err != nil {
				return baseRoot{}, fmt.Errorf("%s: the disk: %w", ref, err)
			}
		}
	}
	return root, nil
}
