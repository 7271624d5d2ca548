package qcow2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/flate"
)

// writeClusterBits is the cluster size Write uses: 64 KiB, qemu-img's default.
const writeClusterBits = 16

// refcountOrder 4: 16-bit reference counts, qemu-img's default.
const refcountOrder = 4

// Options tune Write.
type Options struct {
	// Level is the deflate level (flate.BestSpeed when zero): a builder compresses the
	// whole root under emulation, where speed counts more than the last bytes. (The
	// klauspost/compress encoder and decoder: on a Debian root's clusters they were 4.5
	// and 8 times as fast as the standard library's, for the same size; a TCG builder
	// spent most of a build writing and reading its disks.)
	Level int
	// Skip, when set, says that the disk's bytes [off, off+n) are free space whose contents
	// do not matter: such a cluster is written as zeros (left out). For a filesystem's
	// unused blocks, which keep the bytes of deleted files.
	Skip func(off, n int64) bool
}

// Write writes the first size bytes (whole sectors) of disk to out as a qcow2 version 3 image: every
// cluster that holds data deflate-compressed (stored as it is when that is not smaller),
// clusters that read as zeros left out. The same bytes always give the same image. It
// returns the image's length.
func Write(out io.WriterAt, disk io.ReaderAt, size int64, opts Options) (int64, error) {
	if size <= 0 || size%sectorSize != 0 {
		return 0, fmt.Errorf("a disk of %d bytes: want a positive multiple of %d", size, sectorSize)
	}
	level := opts.Level
	if level == 0 {
		level = flate.BestSpeed
	}
	const cs = int64(1) << writeClusterBits
	const l2Entries = cs / 8
	clusters := (size + cs - 1) / cs
	l2 := make([]uint64, clusters) // each virtual cluster's L2 entry
	refs := map[int64]uint16{0: 1} // host cluster → reference count; 0 is the header
	pos := cs                      // the next free byte of the file

	var comp bytes.Buffer
	zw, err := flate.NewWriter(&comp, level)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, cs)
	zeros := make([]byte, cs)
	x := uint(62 - (writeClusterBits - 8))
	for vc := int64(0); vc < clusters; vc++ {
		off := vc * cs
		n := min(cs, size-off)
		if opts.Skip != nil && opts.Skip(off, n) {
			continue
		}
		clear(buf)
		if m, err := disk.ReadAt(buf[:n], off); err != nil && !(err == io.EOF && int64(m) == n) {
			return 0, fmt.Errorf("reading the disk at %d: %w", off, err)
		}
		if bytes.Equal(buf, zeros) {
			continue
		}
		comp.Reset()
		zw.Reset(&comp)
		if _, err := zw.Write(buf); err != nil {
			return 0, err
		}
		if err := zw.Close(); err != nil {
			return 0, err
		}
		if int64(comp.Len()) >= cs-sectorSize {
			// Not worth it: a plain cluster, which must start on a cluster boundary.
			pos = (pos + cs - 1) / cs * cs
			if _, err := out.WriteAt(buf, pos); err != nil {
				return 0, err
			}
			l2[vc] = uint64(pos) | entryCopied
			refs[pos/cs]++
			pos += cs
			continue
		}
		if _, err := out.WriteAt(comp.Bytes(), pos); err != nil {
			return 0, err
		}
		end := pos + int64(comp.Len())
		sectors := (end+sectorSize-1)/sectorSize - pos/sectorSize // sectors the data touches
		l2[vc] = l2Compressed | uint64(sectors-1)<<x | uint64(pos)
		for c := pos / cs; c <= (end-1)/cs; c++ {
			refs[c]++
		}
		pos = end
	}
	pos = (pos + cs - 1) / cs * cs

	// L2 tables, for each L1 entry that names any cluster.
	l1 := make([]uint64, (clusters+l2Entries-1)/l2Entries)
	table := make([]byte, cs)
	for i := range l1 {
		clear(table)
		used := false
		for j := int64(0); j < l2Entries && int64(i)*l2Entries+j < clusters; j++ {
			e := l2[int64(i)*l2Entries+j]
			used = used || e != 0
			binary.BigEndian.PutUint64(table[8*j:], e)
		}
		if !used {
			continue
		}
		if _, err := out.WriteAt(table, pos); err != nil {
			return 0, err
		}
		l1[i] = uint64(pos) | entryCopied
		refs[pos/cs]++
		pos += cs
	}
	l1Offset := pos
	l1Bytes := make([]byte, len(l1)*8)
	for i, e := range l1 {
		binary.BigEndian.PutUint64(l1Bytes[8*i:], e)
	}
	if _, err := out.WriteAt(l1Bytes, l1Offset); err != nil {
		return 0, err
	}
	l1Clusters := (int64(len(l1Bytes)) + cs - 1) / cs
	for c := int64(0); c < l1Clusters; c++ {
		refs[pos/cs+c]++
	}
	pos += l1Clusters * cs

	// Reference counts: the blocks and their table count themselves too.
	perBlock := cs * 8 / (1 << refcountOrder)
	first := pos / cs // the first cluster of the refcount structures
	var blocks, tableClusters int64
	for {
		total := first + blocks + tableClusters
		nb := (total + perBlock - 1) / perBlock
		nt := (nb*8 + cs - 1) / cs
		if nb == blocks && nt == tableClusters {
			break
		}
		blocks, tableClusters = nb, nt
	}
	tableOffset := pos
	for c := int64(0); c < tableClusters+blocks; c++ {
		refs[first+c]++
	}
	rt := make([]byte, tableClusters*cs)
	for b := int64(0); b < blocks; b++ {
		blockOffset := tableOffset + (tableClusters+b)*cs
		binary.BigEndian.PutUint64(rt[8*b:], uint64(blockOffset))
		block := make([]byte, cs)
		for k := int64(0); k < perBlock; k++ {
			if r := refs[b*perBlock+k]; r != 0 {
				binary.BigEndian.PutUint16(block[2*k:], r)
			}
		}
		if _, err := out.WriteAt(block, blockOffset); err != nil {
			return 0, err
		}
	}
	if _, err := out.WriteAt(rt, tableOffset); err != nil {
		return 0, err
	}
	end := tableOffset + (tableClusters+blocks)*cs

	// The header last: a file cut short before it is not a qcow2 image at all.
	head := make([]byte, cs)
	be := binary.BigEndian
	copy(head, magic)
	be.PutUint32(head[4:], 3)
	be.PutUint32(head[20:], writeClusterBits)
	be.PutUint64(head[24:], uint64(size))
	be.PutUint32(head[36:], uint32(len(l1)))
	be.PutUint64(head[40:], uint64(l1Offset))
	be.PutUint64(head[48:], uint64(tableOffset))
	be.PutUint32(head[56:], uint32(tableClusters))
	be.PutUint32(head[96:], refcountOrder)
	be.PutUint32(head[100:], headerV3Length)
	// Header extensions end at once: the 8 zero bytes at 104 are the end marker.
	if _, err := out.WriteAt(head, 0); err != nil {
		return 0, err
	}
	return end, nil
}
