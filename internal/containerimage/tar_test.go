package containerimage

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var epoch = time.Unix(1700000000, 0)

func TestWriteTarHeaders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		entry    Entry
		wantName string
		wantType byte
		wantMode int64
		wantLink string
		wantBody string
	}{
		{"file", File("etc/passwd", 0o644, []byte("root\n")), "etc/passwd", tar.TypeReg, 0o644, "", "root\n"},
		{"dir gets a slash", Dir("etc", 0o755), "etc/", tar.TypeDir, 0o755, "", ""},
		{"sticky dir", Dir("tmp", 0o777|fs.ModeSticky), "tmp/", tar.TypeDir, 0o1777, "", ""},
		{"setuid file", File("bin/su", 0o755|fs.ModeSetuid, nil), "bin/su", tar.TypeReg, 0o4755, "", ""},
		{"symlink", Entry{Name: "lib64", Mode: fs.ModeSymlink | 0o777, Link: "usr/lib64"}, "lib64", tar.TypeSymlink, 0o777, "usr/lib64", ""},
		{"hard link", Entry{Name: "b", Mode: 0o644, Link: "a"}, "b", tar.TypeLink, 0o644, "a", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTar(&buf, []Entry{tc.entry}, epoch.Add(500*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(&buf)
			h, err := tr.Next()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			if h.Name != tc.wantName || h.Typeflag != tc.wantType || h.Mode != tc.wantMode || h.Linkname != tc.wantLink || string(body) != tc.wantBody {
				t.Errorf("got %q type %c mode %o link %q body %q", h.Name, h.Typeflag, h.Mode, h.Linkname, body)
			}
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("owner %d:%d (%q:%q), want 0:0 without names", h.Uid, h.Gid, h.Uname, h.Gname)
			}
			if !h.ModTime.Equal(epoch) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
				t.Errorf("times m=%v a=%v c=%v, want m=%v only", h.ModTime, h.AccessTime, h.ChangeTime, epoch)
			}
		})
	}
}

// A tree read twice, with its files touched and its owner changed in between, gives the
// same tar bytes: nothing of the files' metadata but names, modes and content reaches it.
func TestReadTreeIsDeterministic(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "usr/bin/a"), []byte("aaa"), 0o755))
	must(t, os.Link(filepath.Join(root, "usr/bin/a"), filepath.Join(root, "usr/bin/b")))
	must(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	must(t, os.WriteFile(filepath.Join(root, "a.b"), []byte("x"), 0o600))

	tarOf := func() []byte {
		entries, err := ReadTree(root, "")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		must(t, WriteTar(&buf, entries, epoch))
		return buf.Bytes()
	}
	first := tarOf()
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(root, "usr/bin/a"), later, later))
	must(t, os.Lchown(filepath.Join(root, "a.b"), 1234, 1234))
	if !bytes.Equal(first, tarOf()) {
		t.Fatal("the same tree gave different tar bytes")
	}

	var got []string
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		got = append(got, string(h.Typeflag)+" "+h.Name+" "+h.Linkname)
	}
	want := []string{"0 a.b ", "2 bin usr/bin", "5 usr/ ", "5 usr/bin/ ", "0 usr/bin/a ", "1 usr/bin/b usr/bin/a"}
	if len(got) != len(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entries %q, want %q", got, want)
		}
	}
}

func TestReadTreeRefusesSpecialFiles(t *testing.T) {
	root := t.TempDir()
	must(t, mkfifo(filepath.Join(root, "fifo")))
	if _, err := ReadTree(root, ""); err == nil {
		t.Fatal("a fifo was accepted")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
