package buildagent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/anvil-dev/anvil/test/testos"
)

// The test OS's real initramfs unpacks, packs to the same bytes every time, and unpacks to
// the same tree.
func TestPackIsDeterministicAndRoundTrips(t *testing.T) {
	gz, err := os.Open(filepath.Join(testos.Dir(t), "amd64", "initramfs"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Unpack(zr, root); err != nil {
		t.Fatalf("unpacking the test OS: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "busybox")); err != nil {
		t.Fatalf("no busybox in the unpacked root: %v", err)
	}
	var a, b bytes.Buffer
	if err := Pack(&a, root, 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := Pack(&b, root, 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("packing the same tree twice gave different bytes")
	}
	again := t.TempDir()
	if err := Unpack(bytes.NewReader(a.Bytes()), again); err != nil {
		t.Fatal(err)
	}
	var c bytes.Buffer
	if err := Pack(&c, again, 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Fatal("unpacking and packing again changed the archive")
	}
	link, err := os.Readlink(filepath.Join(again, "bin", "sh"))
	if err != nil || link != "busybox" {
		t.Errorf("bin/sh = %q, %v; want the symlink to busybox kept", link, err)
	}
}

// archive builds a newc archive by hand: name, mode, data per entry.
func archive(t *testing.T, entries ...[3]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for i, e := range entries {
		var mode uint64
		switch e[1] {
		case "dir":
			mode = modeDir | 0o755
		case "file":
			mode = modeRegular | 0o644
		case "link":
			mode = modeSymlink | 0o777
		}
		if err := writeHeader(w, e[0], header{ino: uint64(i + 1), mode: mode, nlink: 1, size: uint64(len(e[2]))}, 0); err != nil {
			t.Fatal(err)
		}
		w.WriteString(e[2])
		w.Write(make([]byte, pad4(len(e[2]))))
	}
	if err := writeHeader(w, newcTrailer, header{nlink: 1}, 0); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return buf.Bytes()
}

func TestUnpackStaysInsideTheRoot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries [][3]string
		want    string
	}{
		{"dot-dot", [][3]string{{"../escaped", "file", "x"}}, "name leaves the root"},
		{"dot-dot inside", [][3]string{{"a/../../escaped", "file", "x"}}, "name leaves the root"},
		{"through a symlink", [][3]string{{"etc", "link", "/tmp"}, {"etc/escaped", "file", "x"}}, "a parent (/etc) is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			var entries [][3]string
			entries = append(entries, tc.entries...)
			err := Unpack(bytes.NewReader(archive(t, entries...)), root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unpack() = %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(parent, "escaped")); err == nil {
				t.Fatal("a file was written outside the root")
			}
			if _, err := os.Stat("/tmp/escaped"); err == nil {
				t.Fatal("a file was written through the symlink")
			}
		})
	}
}

func TestUnpackReadsConcatenatedArchives(t *testing.T) {
	first := archive(t, [3]string{"etc", "dir", ""}, [3]string{"etc/a", "file", "one"})
	second := archive(t, [3]string{"etc/b", "file", "two"}, [3]string{"etc/a", "file", "replaced"})
	root := t.TempDir()
	if err := Unpack(bytes.NewReader(append(append(first, make([]byte, 512)...), second...)), root); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"etc/a": "replaced", "etc/b": "two"} {
		got, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", f, got, err, want)
		}
	}
}

// A zstd-compressed archive (Debian's initramfs-tools default, Debian's RAM form) unpacks
// like a gzip one, and a root from it is packed with zstd again.
func TestUnpackFileReadsZstd(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "etc", "os-release"), []byte("ID=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	zw, err := zstd.NewWriter(&archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := Pack(zw, src, 0); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "initramfs")
	if err := os.WriteFile(path, archive.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kind, err := unpackFile(path, root)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "os-release")); err != nil || string(b) != "ID=debian\n" {
		t.Fatalf("etc/os-release = %q, %v", b, err)
	}

	// Packed again, it stays zstd, the same bytes each time, and unpacks to the same tree.
	if kind != compressionZstd {
		t.Fatalf("unpackFile says %d, want zstd", kind)
	}
	var packed [2][]byte
	for i := range packed {
		out := filepath.Join(t.TempDir(), "initramfs")
		if err := packFile(root, out, 42, kind); err != nil {
			t.Fatal(err)
		}
		if packed[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(packed[i], zstdMagic) {
			t.Fatalf("packed %x..., want a zstd frame", packed[i][:4])
		}
		again := t.TempDir()
		if k, err := unpackFile(out, again); err != nil || k != compressionZstd {
			t.Fatalf("unpacking the packed root: %v (%d)", err, k)
		}
		if b, err := os.ReadFile(filepath.Join(again, "etc", "os-release")); err != nil || string(b) != "ID=debian\n" {
			t.Fatalf("packed and unpacked, etc/os-release = %q, %v", b, err)
		}
	}
	if !bytes.Equal(packed[0], packed[1]) {
		t.Error("two packs of one tree differ")
	}
}

// A root's special modes survive unpacking (sudo is setuid root, /tmp is sticky): os.Chmod
// dropped them, and Debian's RAM form built on lost sudo. And a symbolic link's mode is
// never applied to what it points at: a link to a file outside the root leaves that file
// as it was.
func TestUnpackKeepsSpecialModesAndNeverFollowsLinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("host file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for _, d := range []string{"usr/bin", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sudo := filepath.Join(src, "usr", "bin", "sudo")
	if err := os.WriteFile(sudo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(sudo, 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(filepath.Join(src, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "etc", "link")); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := Pack(&archive, src, 0); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Unpack(&archive, root); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]uint32{"usr/bin/sudo": 0o4755, "tmp": 0o1777} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, path), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Mode & 0o7777; got != want {
			t.Errorf("%s has mode %o, want %o", path, got, want)
		}
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file a link points at, outside the root: %v %v, want it left at 0600", fi.Mode(), err)
	}
}
