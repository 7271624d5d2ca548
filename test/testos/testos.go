package testos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

// Architectures the test OS is built for.
var Architectures = []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}

// Files are the names, in Dir(t)/ARCH, of one architecture's boot files. cmdline holds the
// kernel command line.
var Files = []string{"kernel", "initramfs", "cmdline"}

// Dir returns the absolute bin/testos folder (of binDir), failing the test when any
// architecture's files are missing.
func Dir(t testing.TB) string {
	t.Helper()
	return bootFiles(t, "testos", "the test OS", "testos", Files)
}

// DebianDiskFiles are the names, in DebianDisk(t)/ARCH, of one architecture's Debian image
// with its root on a disk (for VMs).
var DebianDiskFiles = []string{"kernel", "initramfs", "disk.qcow2", "cmdline"}

// DebianDisk returns the absolute bin/debian/disk folder (make debian: Debian 12 with its
// own cloud-init, hack/debian), failing the test when any architecture's files are missing.
func DebianDisk(t testing.TB) string {
	t.Helper()
	return bootFiles(t, filepath.Join("debian", "disk"), "the Debian image", "debian", DebianDiskFiles)
}

// DebianRAMFiles are the names, in DebianRAM(t)/ARCH, of one architecture's Debian image
// booted from RAM (for servers): the whole root is the initramfs.
var DebianRAMFiles = []string{"kernel", "initramfs", "cmdline"}

// DebianRAM returns the absolute bin/debian/ram folder (make debian), failing the test when
// any architecture's files are missing.
func DebianRAM(t testing.TB) string {
	t.Helper()
	return bootFiles(t, filepath.Join("debian", "ram"), "the Debian image's RAM form", "debian", DebianRAMFiles)
}

// bootFiles is binDir's folder name, failing the test (naming what and make target) when one
// of an architecture's files is missing from it.
func bootFiles(t testing.TB, name, what, target string, files []string) string {
	t.Helper()
	dir := filepath.Join(binDir(t), name)
	for _, arch := range Architectures {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, string(arch), f)); err != nil {
				t.Fatalf("%s is missing (%v): run make %s", what, err, target)
			}
		}
	}
	return dir
}

// ESPImage returns the absolute path of bin/esp.img (make esp): the EFI system partition
// whose GRUB boots the UEFI ISOs Ironic builds, failing the test when it is missing.
func ESPImage(t testing.TB) string {
	t.Helper()
	path := filepath.Join(binDir(t), "esp.img")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the ESP image is missing (%v): run make esp", err)
	}
	return path
}

// EraserDir returns the absolute path of bin/eraser (make eraser): the disk eraser the metal
// site deploys on released servers, failing the test when it is missing.
func EraserDir(t testing.TB) string {
	t.Helper()
	return bootFiles(t, "eraser", "the eraser", "eraser", Files)
}

// binDir is the folder of the built test assets: $KUBEBUILDER_ASSETS when set (a worktree
// runs its tests with the main checkout's bin/), else this checkout's bin/.
func binDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin")
}

// ReadyLine is the line the guest prints on its console once it has read its first-boot
// config: hostname from the config (testos when it names none), marker the value after
// anvil-marker= in the config's bytes (none when there is none).
func ReadyLine(arch computev1alpha1.Architecture, hostname, marker string) string {
	return fmt.Sprintf("ANVIL-TESTOS-READY arch=%s hostname=%s marker=%s", UnameMachine(arch), hostname, marker)
}

// MetaLine is the line the guest prints, before ReadyLine, for each first-boot metadata key
// its runtime did not write itself, the value escaped as the runtime's file has it
// (nocloud.Quote's escapes without the quotes, or JSON's for a config drive).
func MetaLine(key, value string) string {
	return fmt.Sprintf("ANVIL-TESTOS-META %s=%s", key, value)
}

// UnameMachine is the kernel's name (uname -m) for an architecture.
func UnameMachine(arch computev1alpha1.Architecture) string {
	switch arch {
	case computev1alpha1.ArchitectureAMD64:
		return "x86_64"
	case computev1alpha1.ArchitectureARM64:
		return "aarch64"
	}
	return string(arch)
}
