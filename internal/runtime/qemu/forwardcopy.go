package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// forwardCopyDir holds copies of this program for a QEMU user who cannot reach it where it
// is (a checkout or a CI clone under a folder closed to others): root's, open to run,
// closed to write. A copy is named after its content, so every runtime of one build shares
// it, and it outlives the runtime as the QEMU processes that run it do.
const forwardCopyDir = "/run/anvil-qemu"

// reachableCopy is a copy of the program self in dir that any user can run, made when
// missing. dir is made root's 0755 when missing and refused when anyone else could write
// to it (they could swap the program QEMU runs).
func reachableCopy(self, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != uint32(os.Getuid()) || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("folder %s for the guest-forward command must be a folder of uid %d that only it writes (found mode %v)", dir, os.Getuid(), fi.Mode())
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	h := sha256.New()
	if _, err := io.Copy(h, src); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "anvil-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".copy-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}
