package buildagent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The initramfs format: "newc" cpio (magic 070701), 110-byte ASCII-hex headers, names and
// data padded to 4 bytes, ended by an entry named TRAILER!!!.
const (
	newcMagic   = "070701"
	newcHeader  = 110
	newcTrailer = "TRAILER!!!"
)

// Mode bits of a cpio entry's file type.
const (
	modeType    = 0o170000
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
	modeBlock   = 0o060000
	modeFIFO    = 0o010000
)

// maxEntrySize bounds one file of a root: a base is outside input.
const maxEntrySize = 1 << 30

// Unpack extracts a newc archive (concatenated archives too, as the kernel reads them) into
// dir. Every entry must stay inside dir: names with '..' or an absolute path, and entries
// below a symbolic link, are refused.
func Unpack(r io.Reader, dir string) error {
	br := bufio.NewReader(r)
	links := map[string]string{} // dev:ino -> first path, for hard links
	for {
		hdr, err := readHeader(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.name == newcTrailer {
			// Another archive may follow, after zero padding.
			if err := skipZeros(br); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			continue
		}
		if err := extract(br, dir, hdr, links); err != nil {
			return fmt.Errorf("%s: %w", hdr.name, err)
		}
	}
}

type header struct {
	name                           string
	mode, uid, gid, nlink, size    uint64
	devMajor, devMinor, ino        uint64
	rdevMajor, rdevMinor, namesize uint64
}

func readHeader(br *bufio.Reader) (header, error) {
	var raw [newcHeader]byte
	if _, err := io.ReadFull(br, raw[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return header{}, errors.New("truncated cpio header")
		}
		return header{}, err
	}
	if string(raw[:6]) != newcMagic {
		return header{}, fmt.Errorf("not a newc cpio archive (magic %q)", raw[:6])
	}
	field := func(i int) (uint64, error) {
		return strconv.ParseUint(string(raw[6+8*i:14+8*i]), 16, 32)
	}
	var h header
	var vals [13]uint64
	for i := range vals {
		v, err := field(i)
		if err != nil {
			return header{}, fmt.Errorf("cpio header field %d: %w", i, err)
		}
		vals[i] = v
	}
	h.ino, h.mode, h.uid, h.gid, h.nlink = vals[0], vals[1], vals[2], vals[3], vals[4]
	h.size, h.devMajor, h.devMinor, h.rdevMajor, h.rdevMinor, h.namesize = vals[6], vals[7], vals[8], vals[9], vals[10], vals[11]
	if h.namesize == 0 || h.namesize > 4096 {
		return header{}, fmt.Errorf("cpio name size %d", h.namesize)
	}
	if h.size > maxEntrySize {
		return header{}, fmt.Errorf("cpio entry of %d bytes", h.size)
	}
	name := make([]byte, h.namesize)
	if _, err := io.ReadFull(br, name); err != nil {
		return header{}, fmt.Errorf("cpio name: %w", err)
	}
	h.name = strings.TrimRight(string(name), "\x00")
	if _, err := br.Discard(pad4(newcHeader + int(h.namesize))); err != nil {
		return header{}, err
	}
	return h, nil
}

// skipZeros reads past the padding between concatenated archives; io.EOF when none follows.
func skipZeros(br *bufio.Reader) error {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return err
		}
		if b[0] != 0 {
			return nil
		}
		if _, err := br.Discard(1); err != nil {
			return err
		}
	}
}

func extract(br *bufio.Reader, dir string, h header, links map[string]string) error {
	rel := path.Clean("/" + h.name)[1:]
	if rel == "" { // "." is the root itself
		_, err := br.Discard(int(h.size) + pad4(int(h.size)))
		return err
	}
	if h.name != rel && h.name != "./"+rel && h.name != "/"+rel {
		return errors.New("name leaves the root")
	}
	target := filepath.Join(dir, filepath.FromSlash(rel))
	if err := noLinkAbove(dir, rel); err != nil {
		return err
	}
	// A later entry replaces an earlier one, as in the kernel; a directory stays a directory.
	if fi, err := os.Lstat(target); err == nil && !(fi.IsDir() && h.mode&modeType == modeDir) {
		if err := os.RemoveAll(target); err != nil {
			return err
		}
	}
	key := fmt.Sprintf("%d:%d:%d", h.devMajor, h.devMinor, h.ino)
	switch h.mode & modeType {
	case modeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	case modeRegular:
		if first, ok := links[key]; ok && h.nlink > 1 && h.size == 0 {
			return os.Link(first, target)
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, br, int64(h.size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if h.nlink > 1 {
			links[key] = target
		}
	case modeSymlink:
		dest := make([]byte, h.size)
		if _, err := io.ReadFull(br, dest); err != nil {
			return err
		}
		if err := os.Symlink(string(dest), target); err != nil {
			return err
		}
		_, err := br.Discard(pad4(int(h.size)))
		return err
	case modeChar, modeBlock, modeFIFO:
		dev := unix.Mkdev(uint32(h.rdevMajor), uint32(h.rdevMinor))
		if err := unix.Mknod(target, uint32(h.mode&(modeType|0o7777)), int(dev)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported file type %o", h.mode&modeType)
	}
	if _, err := br.Discard(pad4(int(h.size))); err != nil {
		return err
	}
	if err := os.Lchown(target, int(h.uid), int(h.gid)); err != nil {
		return err
	}
	// The mode as the archive has it, setuid, setgid and sticky bits included (os.Chmod
	// would drop them: its FileMode keeps them elsewhere), after the chown, which clears
	// them. Links never get here: they return above.
	return unix.Chmod(target, uint32(h.mode&0o7777))
}

// noLinkAbove refuses a path whose parent directories inside dir include a symbolic link,
// so an archive cannot write through a link to outside the root.
func noLinkAbove(dir, rel string) error {
	parts := strings.Split(rel, "/")
	p := dir
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("a parent (%s) is a symbolic link", strings.TrimPrefix(p, dir))
		}
		if !fi.IsDir() {
			return fmt.Errorf("a parent (%s) is not a directory", strings.TrimPrefix(p, dir))
		}
	}
	return nil
}

func pad4(n int) int { return (4 - n%4) % 4 }

// Pack writes dir as a newc archive: entries sorted by path, every time set to mtime, inode
// numbers assigned in order, so the same tree always gives the same bytes. Hard links are
// stored as separate files.
func Pack(w io.Writer, dir string, mtime int64) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rels := make([]string, len(paths))
	for i, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rels[i] = filepath.ToSlash(rel)
	}
	sort.Strings(rels)
	bw := bufio.NewWriter(w)
	for i, rel := range rels {
		if err := writeEntry(bw, filepath.Join(dir, filepath.FromSlash(rel)), rel, uint64(i+1), mtime); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	if err := writeHeader(bw, newcTrailer, header{nlink: 1}, mtime); err != nil {
		return err
	}
	return bw.Flush()
}

func writeEntry(w *bufio.Writer, p, rel string, ino uint64, mtime int64) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no stat")
	}
	h := header{ino: ino, mode: uint64(st.Mode), uid: uint64(st.Uid), gid: uint64(st.Gid), nlink: 1}
	var data []byte
	switch st.Mode & modeType {
	case modeDir:
		h.nlink = 2
	case modeRegular:
		data, err = os.ReadFile(p)
		if err != nil {
			return err
		}
	case modeSymlink:
		dest, err := os.Readlink(p)
		if err != nil {
			return err
		}
		data = []byte(dest)
	case modeChar, modeBlock:
		h.rdevMajor, h.rdevMinor = uint64(unix.Major(st.Rdev)), uint64(unix.Minor(st.Rdev))
	case modeFIFO:
	default:
		return fmt.Errorf("unsupported file type %o", st.Mode&modeType)
	}
	h.size = uint64(len(data))
	if err := writeHeader(w, rel, h, mtime); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err = w.Write(make([]byte, pad4(len(data))))
	return err
}

func writeHeader(w *bufio.Writer, name string, h header, mtime int64) error {
	fmt.Fprintf(w, "%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		newcMagic, h.ino, h.mode, h.uid, h.gid, h.nlink, uint32(mtime), h.size,
		0, 0, h.rdevMajor, h.rdevMinor, len(name)+1, 0)
	if _, err := w.WriteString(name + "\x00"); err != nil {
		return err
	}
	_, err := w.Write(make([]byte, pad4(newcHeader+len(name)+1)))
	return err
}
