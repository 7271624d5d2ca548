package qcow2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/flate"
)

// The qcow2 format (docs/interop/qcow2.txt in QEMU's source): a big-endian header, a
// two-level table (L1 → L2 → data cluster) per virtual cluster, and reference counts.
const (
	headerV2Length = 72
	headerV3Length = 104
	sectorSize     = 512

	incompatCorrupt      = 1 << 1
	incompatExternalData = 1 << 2
	incompatCompression  = 1 << 3
	incompatExtendedL2   = 1 << 4

	offsetMask     = 0x00fffffffffffe00 // L1 and standard L2 entries: the host offset
	l2Compressed   = 1 << 62
	entryCopied    = 1 << 63
	l2ZeroFlag     = 1 // version 3: the cluster reads as zeros
	minClusterBits = 9
	maxClusterBits = 21
)

var magic = []byte{'Q', 'F', 'I', 0xfb}

// ErrNotQCOW2 means the bytes are not a qcow2 image this package reads.
var ErrNotQCOW2 = errors.New("not a readable qcow2 image")

// Image is an open qcow2 image.
type Image struct {
	r           io.ReaderAt
	size        int64
	clusterBits uint
	l1          []uint64
}

// VirtualSize reads the disk size a qcow2 header declares; head is the file's first 32
// bytes or more.
func VirtualSize(head []byte) (int64, error) {
	if len(head) < 32 || !bytes.Equal(head[:4], magic) {
		return 0, fmt.Errorf("%w: no qcow2 magic", ErrNotQCOW2)
	}
	size := binary.BigEndian.Uint64(head[24:])
	if size > 1<<50 {
		return 0, fmt.Errorf("%w: a virtual size of %d bytes", ErrNotQCOW2, size)
	}
	return int64(size), nil
}

// Open reads r's header and L1 table.
func Open(r io.ReaderAt) (*Image, error) {
	head := make([]byte, headerV3Length+8)
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	head = head[:n]
	size, err := VirtualSize(head)
	if err != nil {
		return nil, err
	}
	if len(head) < headerV2Length {
		return nil, fmt.Errorf("%w: a truncated header", ErrNotQCOW2)
	}
	be := binary.BigEndian
	version := be.Uint32(head[4:])
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("%w: version %d", ErrNotQCOW2, version)
	}
	if be.Uint64(head[8:]) != 0 {
		return nil, fmt.Errorf("%w: it names a backing file", ErrNotQCOW2)
	}
	bits := be.Uint32(head[20:])
	if bits < minClusterBits || bits > maxClusterBits {
		return nil, fmt.Errorf("%w: cluster bits %d", ErrNotQCOW2, bits)
	}
	if be.Uint32(head[32:]) != 0 {
		return nil, fmt.Errorf("%w: it is encrypted", ErrNotQCOW2)
	}
	if version == 3 {
		if len(head) < headerV3Length {
			return nil, fmt.Errorf("%w: a truncated version 3 header", ErrNotQCOW2)
		}
		incompat := be.Uint64(head[72:])
		switch {
		case incompat&incompatCorrupt != 0:
			return nil, fmt.Errorf("%w: marked corrupt", ErrNotQCOW2)
		case incompat&incompatExternalData != 0:
			return nil, fmt.Errorf("%w: its data is in an external file", ErrNotQCOW2)
		case incompat&incompatExtendedL2 != 0:
			return nil, fmt.Errorf("%w: extended L2 entries", ErrNotQCOW2)
		case incompat&incompatCompression != 0 && be.Uint32(head[100:]) > headerV3Length && len(head) > headerV3Length && head[headerV3Length] != 0:
			return nil, fmt.Errorf("%w: compression type %d (only deflate is read)", ErrNotQCOW2, head[headerV3Length])
		}
	}
	img := &Image{r: r, size: size, clusterBits: uint(bits)}
	l1Size := int64(be.Uint32(head[36:]))
	need := (img.clusters() + img.l2Entries() - 1) / img.l2Entries()
	if l1Size < need || l1Size > need+img.l2Entries() {
		return nil, fmt.Errorf("%w: %d L1 entries for %d clusters", ErrNotQCOW2, l1Size, img.clusters())
	}
	raw := make([]byte, l1Size*8)
	if _, err := r.ReadAt(raw, int64(be.Uint64(head[40:]))); err != nil {
		return nil, fmt.Errorf("reading the L1 table: %w", err)
	}
	img.l1 = make([]uint64, l1Size)
	for i := range img.l1 {
		img.l1[i] = be.Uint64(raw[8*i:])
	}
	return img, nil
}

// Size is the virtual disk's size in bytes.
func (img *Image) Size() int64 { return img.size }

func (img *Image) clusterSize() int64 { return 1 << img.clusterBits }
func (img *Image) l2Entries() int64   { return img.clusterSize() / 8 }
func (img *Image) clusters() int64 {
	return (img.size + img.clusterSize() - 1) / img.clusterSize()
}

// CopyTo writes every cluster that holds data to w at its virtual offset; clusters that
// read as zeros are not written, so w must read as zeros where nothing is written (a blank
// disk). It returns the bytes written.
func (img *Image) CopyTo(w io.WriterAt) (int64, error) {
	var written int64
	cs := img.clusterSize()
	buf := make([]byte, cs)
	zeros := make([]byte, cs)
	l2 := make([]byte, cs)
	for i, e := range img.l1 {
		if e&offsetMask == 0 {
			continue
		}
		if _, err := img.r.ReadAt(l2, int64(e&offsetMask)); err != nil {
			return written, fmt.Errorf("reading L2 table %d: %w", i, err)
		}
		for j := int64(0); j < img.l2Entries(); j++ {
			off := (int64(i)*img.l2Entries() + j) * cs
			if off >= img.size {
				break
			}
			n := min(cs, img.size-off)
			ok, err := img.readCluster(binary.BigEndian.Uint64(l2[8*j:]), buf[:n])
			if err != nil {
				return written, fmt.Errorf("cluster at %d: %w", off, err)
			}
			if !ok || bytes.Equal(buf[:n], zeros[:n]) {
				continue
			}
			if _, err := w.WriteAt(buf[:n], off); err != nil {
				return written, err
			}
			written += n
		}
	}
	return written, nil
}

// ReadAt reads the virtual disk.
func (img *Image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	cs := img.clusterSize()
	buf := make([]byte, cs)
	l2 := make([]byte, 8)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		if pos >= img.size {
			return done, io.EOF
		}
		vc := pos / cs
		start := vc * cs
		n := min(cs, img.size-start)
		clear(buf)
		if e := img.l1[vc/img.l2Entries()]; e&offsetMask != 0 {
			if _, err := img.r.ReadAt(l2, int64(e&offsetMask)+8*(vc%img.l2Entries())); err != nil {
				return done, err
			}
			if _, err := img.readCluster(binary.BigEndian.Uint64(l2), buf[:n]); err != nil {
				return done, err
			}
		}
		done += copy(p[done:], buf[pos-start:n])
	}
	return done, nil
}

// readCluster fills out with the cluster an L2 entry names; false when it reads as zeros.
func (img *Image) readCluster(entry uint64, out []byte) (bool, error) {
	if entry&l2Compressed != 0 {
		x := 62 - (img.clusterBits - 8)
		host := int64(entry & (1<<x - 1))
		sectors := int64(entry>>x) & (1<<(img.clusterBits-8) - 1)
		length := (sectors+1)*sectorSize - host%sectorSize
		comp := make([]byte, length)
		n, err := img.r.ReadAt(comp, host)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		zr := flate.NewReader(bytes.NewReader(comp[:n]))
		defer zr.Close()
		if _, err := io.ReadFull(zr, out); err != nil {
			return false, fmt.Errorf("inflating a compressed cluster: %w", err)
		}
		return true, nil
	}
	if entry&l2ZeroFlag != 0 || entry&offsetMask == 0 {
		return false, nil
	}
	n, err := img.r.ReadAt(out, int64(entry&offsetMask))
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return false, err
	}
	clear(out[n:])
	return true, nil
}
