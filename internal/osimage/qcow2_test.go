package osimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuImg runs qemu-img create in dir and returns the file's bytes.
func qemuImg(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	cmd := exec.Command("qemu-img", append(append([]string{"create", "-q", "-f", "qcow2"}, args...), path, "16M")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create %v: %v\n%s (make deps installs qemu-utils)", args, err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// qcow2 disks made by qemu-img itself: those whose header names a host file are refused.
func TestCheckQCOW2(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "host-secret")
	if err := os.WriteFile(secret, []byte("root:$6$hash"), 0o600); err != nil {
		t.Fatal(err)
	}
	v3 := qemuImg(t, dir, "plain.qcow2")
	withFlag := append([]byte(nil), v3...)
	binary.BigEndian.PutUint64(withFlag[qcow2IncompatibleAt:], qcow2ExternalDataFile)
	badVersion := append([]byte(nil), v3...)
	binary.BigEndian.PutUint32(badVersion[qcow2VersionAt:], 4)
	for _, tc := range []struct {
		name string
		disk []byte
		want string // "" when accepted
	}{
		{"plain v3", v3, ""},
		{"plain v2 (compat=0.10)", qemuImg(t, dir, "v2.qcow2", "-o", "compat=0.10"), ""},
		{"backing file", qemuImg(t, dir, "backed.qcow2", "-b", secret, "-F", "raw"), "backing file"},
		{"relative backing file", qemuImg(t, dir, "rel.qcow2", "-b", "host-secret", "-F", "raw"), "backing file"},
		{"backing file, v2", qemuImg(t, dir, "backed-v2.qcow2", "-o", "compat=0.10", "-b", secret, "-F", "raw"), "backing file"},
		{"external data file", qemuImg(t, dir, "data.qcow2", "-o", "data_file="+filepath.Join(dir, "data.raw")), "external file"},
		{"external data bit alone", withFlag, "external file"},
		{"unknown version", badVersion, "version 4"},
		{"raw bytes", bytes.Repeat([]byte{0}, 4096), "not a qcow2 file"},
		{"empty", nil, "not a qcow2 file"},
		{"truncated v3 header", v3[:80], "truncated"},
	} {
		err := CheckQCOW2(bytes.NewReader(tc.disk))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrUnsafeDisk) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrUnsafeDisk saying %q", tc.name, err, tc.want)
		}
	}
}

// Any bytes at all give an answer, never a panic, and a header that names a backing file
// is never accepted.
func TestCheckQCOW2Property(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.Intn(200))
		r.Read(b)
		if len(b) >= 4 && r.Intn(2) == 0 {
			copy(b, qcow2Magic)
		}
		err := CheckQCOW2(bytes.NewReader(b))
		if err == nil && (len(b) < 16 || binary.BigEndian.Uint64(b[qcow2BackingOffsetAt:]) != 0) {
			t.Fatalf("accepted %x", b)
		}
	}
}

// anvil image push refuses such a disk before it leaves the machine.
func TestBuildRefusesABackedQCOW2(t *testing.T) {
	dir := t.TempDir()
	qemuImg(t, dir, "backed.qcow2", "-b", "/etc/hostname", "-F", "raw")
	_, err := Build(Files{Architecture: "amd64", Disk: filepath.Join(dir, "backed.qcow2"), DiskFormat: DiskFormatQCOW2})
	if !errors.Is(err, ErrUnsafeDisk) {
		t.Fatalf("Build: %v, want ErrUnsafeDisk", err)
	}
}
