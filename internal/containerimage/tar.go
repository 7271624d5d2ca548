package containerimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"
)

// Entry is one file of a layer. Its Name is a slash path relative to the image's root.
type Entry struct {
	Name string
	// Mode holds the permission bits (setuid, setgid and sticky included) and the type:
	// 0 for a regular file, fs.ModeDir, fs.ModeSymlink.
	Mode fs.FileMode
	// Link is a symlink's target, or for a regular file an earlier entry's Name this file
	// is a hard link to.
	Link string
	// Data is a regular file's content when Path is empty.
	Data []byte
	// Path is a regular file on disk whose content is read when the layer is written.
	Path string
}

// File is a regular file entry with the given content.
func File(name string, perm fs.FileMode, data []byte) Entry {
	return Entry{Name: name, Mode: perm, Data: data}
}

// Dir is a directory entry.
func Dir(name string, perm fs.FileMode) Entry { return Entry{Name: name, Mode: fs.ModeDir | perm} }

// FromDisk is a regular file entry whose content is the file at p.
func FromDisk(name string, perm fs.FileMode, p string) Entry {
	return Entry{Name: name, Mode: perm, Path: p}
}

// ReadTree lists the file tree at root as entries under prefix ("" for the image's root),
// directories before their contents, names in byte order within a directory. Files linked
// more than once become hard links to the first name seen; other file types (devices,
// sockets, fifos) are refused, since no Debian package ships one.
func ReadTree(root, prefix string) ([]Entry, error) {
	var entries []Entry
	type inode struct{ dev, ino uint64 }
	first := map[inode]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		perm := info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch {
		case info.Mode().IsDir():
			entries = append(entries, Dir(name, perm))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, Entry{Name: name, Mode: fs.ModeSymlink | 0o777, Link: target})
		case info.Mode().IsRegular():
			e := FromDisk(name, perm, p)
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs by GOARCH
				if to, seen := first[key]; seen {
					e = Entry{Name: name, Mode: perm, Link: to}
				} else {
					first[key] = name
				}
			}
			entries = append(entries, e)
		default:
			return fmt.Errorf("%s: %s is not a file, directory or symlink", p, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the tree at %s: %w", root, err)
	}
	return entries, nil
}

// WriteTar writes entries, in their order, as an uncompressed tar stream: owner 0:0, no
// user or group names, every modification time mtime, no access or change time. The same
// entries and mtime always give the same bytes.
func WriteTar(w io.Writer, entries []Entry, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeEntry(tw, e, mtime); err != nil {
			return fmt.Errorf("layer entry %s: %w", e.Name, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e Entry, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    e.Name,
		Mode:    int64(e.Mode.Perm()),
		ModTime: mtime.UTC().Truncate(time.Second),
		Format:  tar.FormatPAX,
	}
	// tar keeps setuid, setgid and sticky in the mode's high bits (c_ISUID and so on).
	if e.Mode&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if e.Mode&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if e.Mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	var body io.Reader
	switch {
	case e.Mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, e.Name+"/"
	case e.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
	case e.Link != "":
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, e.Link
	case e.Path != "":
		f, err := os.Open(e.Path)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size, body = tar.TypeReg, info.Size(), f
	default:
		hdr.Typeflag, hdr.Size, body = tar.TypeReg, int64(len(e.Data)), bytes.NewReader(e.Data)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	n, err := io.Copy(tw, body)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%s changed size while being written", e.Path)
	}
	return err
}
