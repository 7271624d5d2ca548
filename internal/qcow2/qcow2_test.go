package qcow2

import (
	"bytes"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// qemuImg runs the host's qemu-img, the oracle of these tests; its absence fails them.
func qemuImg(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Fatalf("qemu-img is missing (apt-get install qemu-utils): %v", err)
	}
	out, err := exec.Command("qemu-img", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// disk is a test disk of size bytes: runs of zeros, of random bytes and of one repeated
// byte, so some clusters compress well, some not at all, and some are left out.
func disk(seed int64, size int) []byte {
	r := rand.New(rand.NewSource(seed))
	b := make([]byte, size)
	for off := 0; off < size; {
		n := min(size-off, 1+r.Intn(200_000))
		switch r.Intn(3) {
		case 1:
			r.Read(b[off : off+n])
		case 2:
			v := byte(r.Intn(256))
			for i := off; i < off+n; i++ {
				b[i] = v
			}
		}
		off += n
	}
	return b
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Images qemu-img writes (compressed or not, other cluster sizes, version 2) read back as
// the raw disk they came from, through ReadAt and CopyTo.
func TestOpenReadsWhatQemuImgWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		args []string
	}{
		{"compressed", 3<<20 + 4096, []string{"-c"}},
		{"plain", 3 << 20, nil},
		{"compressed 4k clusters", 1<<20 + 512, []string{"-c", "-o", "cluster_size=4096"}},
		{"compressed 2M clusters", 5 << 20, []string{"-c", "-o", "cluster_size=2M"}},
		{"version 2", 2 << 20, []string{"-c", "-o", "compat=0.10"}},
		{"all zeros", 1 << 20, []string{"-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raw := disk(int64(tc.size), tc.size)
			if tc.name == "all zeros" {
				raw = make([]byte, tc.size)
			}
			src := writeFile(t, dir, "disk.raw", raw)
			img := filepath.Join(dir, "disk.qcow2")
			qemuImg(t, append(append([]string{"convert", "-f", "raw", "-O", "qcow2"}, tc.args...), src, img)...)
			q := openAndCompare(t, img, raw)
			out, err := os.Create(filepath.Join(dir, "copy.raw"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			if err := out.Truncate(int64(tc.size)); err != nil {
				t.Fatal(err)
			}
			if _, err := q.CopyTo(out); err != nil {
				t.Fatal(err)
			}
			copied, _ := os.ReadFile(out.Name())
			if !bytes.Equal(copied, raw) {
				t.Fatal("CopyTo wrote other bytes")
			}
		})
	}
}

// What Write makes, qemu-img checks clean (reference counts, no leaks) and converts back to
// the same raw disk; writing the same disk twice gives the same bytes.
func TestWriteIsReadByQemuImg(t *testing.T) {
	for _, size := range []int{1 << 20, 3<<20 + 1024, 64 << 10, 512} {
		dir := t.TempDir()
		raw := disk(int64(size)+7, size)
		img := filepath.Join(dir, "out.qcow2")
		writeImage(t, img, raw, Options{})
		qemuImg(t, "check", img)
		back := filepath.Join(dir, "back.raw")
		qemuImg(t, "convert", "-f", "qcow2", "-O", "raw", img, back)
		got, _ := os.ReadFile(back)
		if !bytes.Equal(got, raw) {
			t.Fatalf("size %d: qemu-img reads other bytes (%d of %d)", size, len(got), len(raw))
		}
		info := qemuImg(t, "info", img)
		if !strings.Contains(info, "compat: 1.1") {
			t.Errorf("qemu-img info:\n%s", info)
		}
		again := filepath.Join(dir, "again.qcow2")
		writeImage(t, again, raw, Options{})
		a, _ := os.ReadFile(img)
		b, _ := os.ReadFile(again)
		if !bytes.Equal(a, b) {
			t.Errorf("size %d: two writes of one disk differ", size)
		}
	}
}

// Skipped ranges read back as zeros; the rest as written.
func TestWriteLeavesOutSkippedClusters(t *testing.T) {
	dir := t.TempDir()
	raw := disk(3, 1<<20)
	img := filepath.Join(dir, "out.qcow2")
	skip := func(off, n int64) bool { return off >= 256<<10 && off+n <= 512<<10 }
	writeImage(t, img, raw, Options{Skip: skip})
	qemuImg(t, "check", img)
	want := append([]byte(nil), raw...)
	clear(want[256<<10 : 512<<10])
	back := filepath.Join(dir, "back.raw")
	qemuImg(t, "convert", "-O", "raw", img, back)
	if got, _ := os.ReadFile(back); !bytes.Equal(got, want) {
		t.Fatal("the skipped clusters are not zeros, or others changed")
	}
}

// Property: any disk written and opened again reads as itself.
func TestWriteOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		size := 512 * rapid.IntRange(1, 4096).Draw(t, "sectors")
		raw := disk(rapid.Int64().Draw(t, "seed"), size)
		p := filepath.Join(dir, "rt.qcow2")
		os.Remove(p)
		writeImage(t, p, raw, Options{Level: rapid.IntRange(1, 9).Draw(t, "level")})
		openAndCompare(t, p, raw)
	})
}

// openAndCompare opens the image at path, which must read as raw (ReadAt), and returns it;
// the file closes with the test.
func openAndCompare(t tb, path string, raw []byte) *Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	q, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	if q.Size() != int64(len(raw)) {
		t.Fatalf("size %d, want %d", q.Size(), len(raw))
	}
	got := make([]byte, len(raw))
	if n, err := q.ReadAt(got, 0); err != nil || n != len(raw) || !bytes.Equal(got, raw) {
		t.Fatalf("ReadAt: %d bytes, %v; equal %v", n, err, bytes.Equal(got, raw))
	}
	return q
}

// tb is what writeImage needs of a test: testing.TB or rapid.T.
type tb interface {
	Helper()
	Cleanup(func())
	Fatal(...any)
	Fatalf(string, ...any)
}

func writeImage(t tb, path string, raw []byte, opts Options) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := Write(f, bytes.NewReader(raw), int64(len(raw)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != n {
		t.Fatalf("Write says %d bytes, the file has %d", n, fi.Size())
	}
}

// Headers that name other files, or that this package cannot read, are refused.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	base := writeFile(t, dir, "base.raw", make([]byte, 1<<20))
	for name, args := range map[string][]string{
		"backing file": {"create", "-f", "qcow2", "-F", "raw", "-b", base, filepath.Join(dir, "overlay.qcow2")},
		"zstd":         {"create", "-f", "qcow2", "-o", "compression_type=zstd", filepath.Join(dir, "zstd.qcow2"), "1M"},
		"extended L2":  {"create", "-f", "qcow2", "-o", "extended_l2=on", filepath.Join(dir, "l2.qcow2"), "1M"},
	} {
		qemuImg(t, args...)
		f, err := os.Open(args[len(args)-1])
		if name != "backing file" {
			f, err = os.Open(args[len(args)-2])
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(f); err == nil {
			t.Errorf("%s: opened", name)
		}
		f.Close()
	}
	if _, err := Open(bytes.NewReader([]byte("not a disk at all, but long enough for a header........"))); err == nil {
		t.Error("opened a file without the magic")
	}
}
