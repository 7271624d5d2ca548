package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// CreateOverlay makes path a qcow2 file whose reads fall through to backing (never
// written: the shared image cache stays pristine). A size larger than the backing disk
// grows the overlay; 0 keeps the backing size. A crash midway leaves no half-made file.
func CreateOverlay(ctx context.Context, path, backing string, backingFormat DiskFormat, size int64) error {
	virtual, err := VirtualSize(ctx, backing, backingFormat)
	if err != nil {
		return err
	}
	args := []string{"create", "-q", "-f", "qcow2", "-b", backing, "-F", string(backingFormat)}
	return qemuImgCreate(ctx, path, args, max(size, virtual))
}

// CreateEmpty makes path an empty qcow2 disk of size bytes.
func CreateEmpty(ctx context.Context, path string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("empty disk %s: size %d must be positive", path, size)
	}
	return qemuImgCreate(ctx, path, []string{"create", "-q", "-f", "qcow2"}, size)
}

// qemuImgCreate runs qemu-img create into a temporary name and renames it into place.
func qemuImgCreate(ctx context.Context, path string, args []string, size int64) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	args = append(args, tmp, strconv.FormatInt(size, 10))
	if out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("qemu-img %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, path)
}

// VirtualSize returns the size the guest sees of the disk file at path.
func VirtualSize(ctx context.Context, path string, format DiskFormat) (int64, error) {
	_, size, err := Inspect(ctx, path, format)
	return size, err
}

// Inspect returns the format and virtual size of the disk file at path; an empty format
// lets qemu-img probe it.
func Inspect(ctx context.Context, path string, format DiskFormat) (DiskFormat, int64, error) {
	args := []string{"info", "--output=json", "-U"}
	if format != "" {
		args = append(args, "-f", string(format))
	}
	out, err := exec.CommandContext(ctx, "qemu-img", append(args, path)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", 0, fmt.Errorf("qemu-img info %s: %w: %s", path, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		Format      DiskFormat `json:"format"`
		VirtualSize int64      `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.Format, info.VirtualSize, nil
}
