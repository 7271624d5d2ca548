package qemu

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A program under a folder closed to QEMU's user is copied once, open to run, into a folder
// only its owner writes; a folder others could write to (and so swap the program) is refused.
func TestReachableCopy(t *testing.T) {
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(closed, "anvil")
	if err := os.WriteFile(self, []byte("#!/bin/sh\necho forward\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "anvil-qemu")
	got, err := reachableCopy(self, dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reachableCopy(self, dir)
	if err != nil || again != got {
		t.Fatalf("second copy: %q, %v; want %q again", again, err, got)
	}
	for path, want := range map[string]os.FileMode{dir: 0o755, got: 0o755} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", path, fi.Mode(), err, want)
		}
	}
	if raw, err := os.ReadFile(got); err != nil || !bytes.Equal(raw, []byte("#!/bin/sh\necho forward\n")) {
		t.Errorf("the copy holds %q, %v", raw, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the copy folder, want the copy alone", len(entries))
	}

	open := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := reachableCopy(self, open); err == nil {
		t.Error("a world-writable folder was used for the program QEMU runs")
	}
}
