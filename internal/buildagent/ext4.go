package buildagent

import (
	"encoding/binary"
	"fmt"
	"io"
)

// ext4's on-disk layout, as far as the block bitmaps (the kernel's
// Documentation/filesystems/ext4/ has the rest); little-endian.
const (
	ext4SuperblockAt     = 1024
	ext4Magic            = 0xef53
	ext4Incompat64Bit    = 0x80
	ext4IncompatMetaBG   = 0x10
	ext4BlockUninit      = 0x2 // a group's bitmap is not written: the kernel computes it
	ext4MinDescSize      = 32
	ext4MaxBlockSizeLog2 = 6 // 64 KiB
)

// ext4FreeSpace reads an unmounted ext4 filesystem's block bitmaps and returns what says
// whether a byte range of the disk lies wholly in free blocks: their bytes are what deleted
// files left, and an image of the disk need not keep them. Where it cannot tell (a group
// whose bitmap is not written, past the filesystem's end, meta_bg layouts), a range is not
// free.
func ext4FreeSpace(dev io.ReaderAt) (func(off, n int64) bool, error) {
	sb := make([]byte, 1024)
	if _, err := dev.ReadAt(sb, ext4SuperblockAt); err != nil {
		return nil, fmt.Errorf("reading the ext4 superblock: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[56:]) != ext4Magic {
		return nil, fmt.Errorf("not an ext4 filesystem")
	}
	logSize := le.Uint32(sb[24:])
	if logSize > ext4MaxBlockSizeLog2 {
		return nil, fmt.Errorf("ext4 block size 2^(10+%d)", logSize)
	}
	bs := int64(1024) << logSize
	blocks := int64(le.Uint32(sb[4:]))
	firstData := int64(le.Uint32(sb[20:]))
	perGroup := int64(le.Uint32(sb[32:]))
	incompat := le.Uint32(sb[96:])
	descSize := int64(ext4MinDescSize)
	if incompat&ext4Incompat64Bit != 0 {
		blocks |= int64(le.Uint32(sb[336:])) << 32
		if d := int64(le.Uint16(sb[254:])); d >= ext4MinDescSize {
			descSize = d
		}
	}
	if incompat&ext4IncompatMetaBG != 0 || perGroup <= 0 || perGroup > bs*8 || blocks <= firstData {
		return func(int64, int64) bool { return false }, nil
	}
	groups := (blocks - firstData + perGroup - 1) / perGroup
	descs := make([]byte, groups*descSize)
	if _, err := dev.ReadAt(descs, (firstData+1)*bs); err != nil {
		return nil, fmt.Errorf("reading the ext4 group descriptors: %w", err)
	}
	used := make([]byte, (blocks+7)/8) // bit b: block b is in use, or unknown
	for g := int64(0); g < groups; g++ {
		d := descs[g*descSize:]
		start := firstData + g*perGroup
		n := min(perGroup, blocks-start)
		bitmapAt := int64(le.Uint32(d[0:]))
		if descSize >= 64 {
			bitmapAt |= int64(le.Uint32(d[32:])) << 32
		}
		bitmap := make([]byte, bs)
		known := le.Uint16(d[18:])&ext4BlockUninit == 0 && bitmapAt > 0 && bitmapAt < blocks
		if known {
			if _, err := dev.ReadAt(bitmap, bitmapAt*bs); err != nil {
				return nil, fmt.Errorf("reading group %d's block bitmap: %w", g, err)
			}
		}
		for i := int64(0); i < n; i++ {
			if !known || bitmap[i/8]&(1<<(i%8)) != 0 {
				b := start + i
				used[b/8] |= 1 << (b % 8)
			}
		}
	}
	for b := int64(0); b < firstData; b++ { // the boot block of 1 KiB filesystems
		used[b/8] |= 1 << (b % 8)
	}
	return func(off, n int64) bool {
		if n <= 0 || off < 0 || off+n > blocks*bs {
			return false
		}
		for b := off / bs; b <= (off+n-1)/bs; b++ {
			if used[b/8]&(1<<(b%8)) != 0 {
				return false
			}
		}
		return true
	}, nil
}
