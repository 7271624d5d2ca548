package osimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrUnsafeDisk means an image's qcow2 disk would make QEMU (or qemu-img) open another
// file of the host: a backing file or an external data file named in its header. A guest
// booted from such a disk reads that file (say /etc/shadow) as its own disk.
var ErrUnsafeDisk = errors.New("unsafe qcow2 disk")

// qcow2Magic starts every qcow2 file; it tells a mislabelled disk before it is pushed.
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// The qcow2 header fields read (docs/interop/qcow2.txt in QEMU's source), big-endian.
const (
	qcow2VersionAt        = 4  // uint32: 2 or 3
	qcow2BackingOffsetAt  = 8  // uint64: 0 when there is no backing file
	qcow2IncompatibleAt   = 72 // uint64, version 3 only: incompatible feature bits
	qcow2HeaderV3Length   = 104
	qcow2ExternalDataFile = 1 << 2 // incompatible bit 2: the data is in another file
)

// CheckQCOW2 refuses a qcow2 image whose header names another file: a backing file, or an
// external data file. It reads the header only, never following anything it names, so
// it is safe on hostile bytes. A file that is not qcow2 at all is refused too: the caller
// declared it qcow2.
func CheckQCOW2(r io.ReaderAt) error {
	head := make([]byte, qcow2HeaderV3Length)
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the qcow2 header: %w", err)
	}
	head = head[:n]
	if len(head) < qcow2BackingOffsetAt+8 || !bytes.Equal(head[:4], qcow2Magic) {
		return fmt.Errorf("%w: not a qcow2 file", ErrUnsafeDisk)
	}
	version := binary.BigEndian.Uint32(head[qcow2VersionAt:])
	if version != 2 && version != 3 {
		return fmt.Errorf("%w: qcow2 version %d (QEMU knows 2 and 3)", ErrUnsafeDisk, version)
	}
	if binary.BigEndian.Uint64(head[qcow2BackingOffsetAt:]) != 0 {
		return fmt.Errorf("%w: its header names a backing file, which would be read from the host", ErrUnsafeDisk)
	}
	if version == 3 {
		if len(head) < qcow2HeaderV3Length {
			return fmt.Errorf("%w: a truncated version 3 header", ErrUnsafeDisk)
		}
		if binary.BigEndian.Uint64(head[qcow2IncompatibleAt:])&qcow2ExternalDataFile != 0 {
			return fmt.Errorf("%w: its data is in an external file, which would be read from the host", ErrUnsafeDisk)
		}
	}
	return nil
}

// CheckQCOW2File is CheckQCOW2 of the file at path.
func CheckQCOW2File(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return CheckQCOW2(f)
}
