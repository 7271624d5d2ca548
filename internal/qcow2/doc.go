// Package qcow2 reads and writes QEMU's qcow2 disk format in pure Go, for a builder guest
// that has no qemu-img: Open reads an image (plain, zero and deflate-compressed clusters,
// versions 2 and 3) and CopyTo writes its data onto a block device; Write makes a
// compressed version 3 image of a disk's data, skipping clusters that read as zeros.
//
// It never follows anything a header names outside the file: an image with a backing file,
// an external data file, encryption or extended L2 entries is refused, not read.
package qcow2
