package buildagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/qcow2"
)

// sysBlock lists the guest's block devices, found in devDir (variables for the tests).
var sysBlock, devDir = "/sys/block", "/dev"

// findRootDevice is the builder's scratch disk: the one writable virtio disk of exactly
// size bytes (the seed disk is read-only, and the controller gives no other).
func findRootDevice(sys string, size int64) (string, error) {
	entries, err := os.ReadDir(sys)
	if err != nil {
		return "", err
	}
	var found, seen []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "vd") {
			continue
		}
		sectors, err1 := readInt(filepath.Join(sys, name, "size"))
		ro, err2 := readInt(filepath.Join(sys, name, "ro"))
		if err1 != nil || err2 != nil {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (%d bytes, ro=%d)", name, sectors*512, ro))
		if ro == 0 && sectors*512 == size {
			found = append(found, filepath.Join(devDir, name))
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want one writable disk of %d bytes for the root, found %d among %v", size, len(found), seen)
	}
	return found[0], nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// writeDisk writes a base's disk layer (qcow2 or raw) onto dev, which reads as zeros (a
// blank disk): only the parts holding data are written. It returns the disk's size.
func writeDisk(path string, format osimage.DiskFormat, dev *os.File, devSize int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	switch format {
	case osimage.DiskFormatQCOW2:
		img, err := qcow2.Open(f)
		if err != nil {
			return 0, err
		}
		if img.Size() > devSize {
			return 0, fmt.Errorf("the disk is %d bytes, the scratch disk %d", img.Size(), devSize)
		}
		_, err = img.CopyTo(dev)
		return img.Size(), err
	case osimage.DiskFormatRaw:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		if fi.Size() > devSize {
			return 0, fmt.Errorf("the disk is %d bytes, the scratch disk %d", fi.Size(), devSize)
		}
		return fi.Size(), copyNonZero(dev, f)
	}
	return 0, fmt.Errorf("disk format %q", format)
}

// copyNonZero copies r to w at the same offsets, leaving out chunks of zeros.
func copyNonZero(w io.WriterAt, r io.Reader) error {
	buf := make([]byte, 1<<20)
	zeros := make([]byte, len(buf))
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 && !bytes.Equal(buf[:n], zeros[:n]) {
			if _, werr := w.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// bootFiles are where a Debian-style root names its kernel and initramfs (links kept by
// the kernel package's hooks).
var bootFiles = []string{"/vmlinuz", "/initrd.img"}

// bootState is what /boot and the root's kernel links hold: names, sizes, times and link
// targets, enough to tell that a step installed or rebuilt a kernel or initramfs.
func bootState(root string) (string, error) {
	var lines []string
	boot := filepath.Join(root, "boot")
	err := filepath.WalkDir(boot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %d %v", strings.TrimPrefix(p, root), fi.Size(), fi.ModTime().UnixNano(), fi.Mode()))
		return nil
	})
	if err != nil {
		return "", err
	}
	for _, f := range bootFiles {
		dest, _ := os.Readlink(filepath.Join(root, f))
		lines = append(lines, f+" -> "+dest)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// copyBootFiles copies the root's kernel and initramfs (bootFiles, followed inside the
// root) to kernel and initramfs.
func copyBootFiles(root, kernel, initramfs string) error {
	for i, to := range []string{kernel, initramfs} {
		host, err := resolveInRoot(root, bootFiles[i])
		if err != nil {
			return err
		}
		fi, err := os.Stat(host)
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("a step changed /boot, and the root's %s is not a file (%v): the image would boot the old kernel", bootFiles[i], err)
		}
		if err := copyFile(host, to); err != nil {
			return err
		}
	}
	return nil
}

// buildOnDisk writes the base's disk onto the builder's scratch disk, mounts its root
// (ext4), runs the steps there, and writes the result as a compressed qcow2 disk. The
// kernel and initramfs are the base's unless a step changed /boot; then they are the
// root's own.
func buildOnDisk(ctx context.Context, job *Job, base osimage.Files, work string, log io.Writer) (osimage.Files, error) {
	if base.Kernel == "" {
		return osimage.Files{}, fmt.Errorf("the base's %s entry has a disk and no kernel: it is not bootable", job.Architecture)
	}
	if job.RootDiskBytes <= 0 {
		return osimage.Files{}, errors.New("the base has a disk root and the job gives no scratch disk for it")
	}
	path, err := findRootDevice(sysBlock, job.RootDiskBytes)
	if err != nil {
		return osimage.Files{}, err
	}
	dev, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return osimage.Files{}, err
	}
	defer dev.Close()
	say(log, "writing the base's disk onto %s", path)
	size, err := writeDisk(base.Disk, base.DiskFormat, dev, job.RootDiskBytes)
	if err != nil {
		return osimage.Files{}, fmt.Errorf("writing the base's disk: %w", err)
	}
	// The pulled layer lives in the builder's memory; the disk holds it now.
	_ = os.Remove(base.Disk)
	if err := dev.Sync(); err != nil {
		return osimage.Files{}, err
	}
	root := filepath.Join(work, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return osimage.Files{}, err
	}
	if err := unix.Mount(path, root, "ext4", 0, ""); err != nil {
		return osimage.Files{}, fmt.Errorf("mounting the base's disk as ext4 (the root must be one ext4 filesystem, no partition table): %w", err)
	}
	mounted := true
	defer func() {
		if mounted {
			_ = unix.Unmount(root, unix.MNT_DETACH)
		}
	}()
	say(log, "the root is mounted; running the steps")
	before, err := bootState(root)
	if err != nil {
		return osimage.Files{}, err
	}
	if err := execute(ctx, root, job.Program, job.Context, job.stepEnv(), log); err != nil {
		return osimage.Files{}, err
	}
	after, err := bootState(root)
	if err != nil {
		return osimage.Files{}, err
	}
	files := osimage.Files{Kernel: base.Kernel, Initramfs: base.Initramfs}
	if before != after {
		say(log, "a step changed /boot: the image boots the root's own kernel and initramfs")
		files.Kernel, files.Initramfs = filepath.Join(work, "kernel"), filepath.Join(work, "initramfs")
		if err := copyBootFiles(root, files.Kernel, files.Initramfs); err != nil {
			return osimage.Files{}, err
		}
	}
	if err := unix.Unmount(root, 0); err != nil {
		return osimage.Files{}, fmt.Errorf("unmounting the root: %w", err)
	}
	mounted = false
	// Free blocks keep what deleted files held (the base's own build, apt's downloads):
	// left out, they cost neither compression nor layer bytes.
	free, err := ext4FreeSpace(dev)
	if err != nil {
		return osimage.Files{}, err
	}
	say(log, "writing the disk (qcow2, compressed, the filesystem's free blocks left out)")
	files.Disk, files.DiskFormat = filepath.Join(work, "disk.qcow2"), osimage.DiskFormatQCOW2
	out, err := os.Create(files.Disk)
	if err != nil {
		return osimage.Files{}, err
	}
	n, err := qcow2.Write(out, dev, size, qcow2.Options{Skip: free})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return osimage.Files{}, fmt.Errorf("writing the disk: %w", err)
	}
	say(log, "disk: %d bytes (%d virtual)", n, size)
	return files, nil
}
