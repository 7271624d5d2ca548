package osimage

import (
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fileLayer is a layer whose bytes are a local file, stored as they are (an OS image's
// artifacts are not tarballs and are not compressed by us). Its digest is taken once, when
// it is made; a file changed afterwards is caught by the registry's digest check on upload.
type fileLayer struct {
	path      string
	mediaType types.MediaType
	digest    v1.Hash
	size      int64
}

func newFileLayer(path string, mediaType types.MediaType) (*fileLayer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	h, n, err := v1.SHA256(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return &fileLayer{path: path, mediaType: mediaType, digest: h, size: n}, nil
}

func (l *fileLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the digest: the bytes are stored uncompressed.
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return l.mediaType, nil }

func (l *fileLayer) descriptor(title string) v1.Descriptor {
	return v1.Descriptor{
		MediaType: l.mediaType, Size: l.size, Digest: l.digest,
		// The title lets generic OCI tools (oras pull) name the file they write.
		Annotations: map[string]string{"org.opencontainers.image.title": title},
	}
}
