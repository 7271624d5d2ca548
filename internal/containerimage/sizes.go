package containerimage

import (
	"fmt"
	"io"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Size is how big one image is: Compressed is what a pull downloads (its layers as
// stored, its config and manifest); Uncompressed is its layers' tar streams.
type Size struct {
	Compressed, Uncompressed int64
}

// ImageSize measures img.
func ImageSize(img v1.Image) (Size, error) {
	var s Size
	m, err := img.Manifest()
	if err != nil {
		return s, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return s, err
	}
	s.Compressed = m.Config.Size + int64(len(raw))
	layers, err := img.Layers()
	if err != nil {
		return s, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return s, err
		}
		s.Compressed += n
		u, err := uncompressedSize(l)
		if err != nil {
			return s, err
		}
		s.Uncompressed += u
	}
	return s, nil
}

func uncompressedSize(l v1.Layer) (int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

// SizesHeader heads a SIZES file, a table of SizeLine lines.
const SizesHeader = "# image arch compressed uncompressed (bytes, then MiB): what a pull downloads, what it unpacks to"

// SizeLine is one image's line of a SIZES file: "NAME ARCH COMPRESSED UNCOMPRESSED" in
// bytes, then both again in MiB.
func SizeLine(name, arch string, s Size) string {
	mib := func(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) }
	return fmt.Sprintf("%s %s %d %d %s %s", name, arch, s.Compressed, s.Uncompressed, mib(s.Compressed), mib(s.Uncompressed))
}
