package buildagent

import (
	"bytes"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/internal/qcow2"
)

// A filesystem whose deleted file left its bytes in free blocks: the image written without
// the free blocks is smaller, passes e2fsck, and keeps every file that is still there.
func TestExt4FreeSpaceLeavesOutWhatDeletedFilesLeft(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	keep, gone := make([]byte, 3<<20), make([]byte, 8<<20)
	r.Read(keep)
	r.Read(gone)
	for name, b := range map[string][]byte{"keep": keep, "gone": gone} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw := filepath.Join(dir, "disk.raw")
	mustRun(t, "mke2fs", "-q", "-t", "ext4", "-d", root, raw, "32M")
	mustRun(t, "debugfs", "-w", "-R", "rm /gone", raw) // frees the blocks, leaves the bytes

	write := func(free bool) (string, int64) {
		f, err := os.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var opts qcow2.Options
		if free {
			if opts.Skip, err = ext4FreeSpace(f); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(dir, map[bool]string{true: "free.qcow2", false: "all.qcow2"}[free])
		o, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		n, err := qcow2.Write(o, f, 32<<20, opts)
		if err != nil {
			t.Fatal(err)
		}
		return out, n
	}
	_, all := write(false)
	img, without := write(true)
	if without > all-7<<20 {
		t.Errorf("the image without free blocks is %d bytes, with them %d: the deleted file's 8 MiB were kept", without, all)
	}
	back := filepath.Join(dir, "back.raw")
	mustRun(t, "qemu-img", "convert", "-O", "raw", img, back)
	mustRun(t, "e2fsck", "-fn", back)
	got, err := exec.Command("debugfs", "-R", "cat /keep", back).Output()
	if err != nil || !bytes.Equal(got, keep) {
		t.Fatalf("/keep after the round trip: %d bytes, %v", len(got), err)
	}
}
