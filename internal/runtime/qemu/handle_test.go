package qemu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// The attack: a guest writes a qcow2 header naming a host file into its raw handle volume,
// so that a probing runtime would, at the next start, open that file as the disk. The
// format comes from the file's name instead; a *.qcow2 handle naming another file is
// refused.
func TestHandleFormatIsNeverProbed(t *testing.T) {
	dir := t.TempDir()
	qcow2 := func(name string, args ...string) string {
		path := filepath.Join(dir, name)
		if out, err := exec.Command("qemu-img", append(append([]string{"create", "-q", "-f", "qcow2"}, args...), path, "16M")...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v\n%s", err, out)
		}
		return path
	}
	// What a guest can leave in its raw disk: a qcow2 header with a backing file.
	guestWritten := qcow2("data", "-b", "/etc/hostname", "-F", "raw")
	clean := qcow2("clean.qcow2")
	backed := qcow2("backed.qcow2", "-b", "/etc/hostname", "-F", "raw")
	for _, tc := range []struct {
		path    string
		want    vm.DiskFormat
		wantErr error
	}{
		{guestWritten, vm.FormatRaw, nil},
		{clean, vm.FormatQCOW2, nil},
		{backed, "", osimage.ErrUnsafeDisk},
		{filepath.Join(dir, "missing.qcow2"), "", os.ErrNotExist},
	} {
		got, err := handleFormat(tc.path)
		if got != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: %q, %v; want %q, %v", filepath.Base(tc.path), got, err, tc.want, tc.wantErr)
		}
	}
}
