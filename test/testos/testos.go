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

// Dir returns the absolute bin/testos folder of this checkout, failing the test when any
// architecture's files are missing.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "bin", "testos")
	for _, arch := range Architectures {
		for _, f := range Files {
			if _, err := os.Stat(filepath.Join(dir, string(arch), f)); err != nil {
				t.Fatalf("the test OS is missing (%v): run make testos", err)
			}
		}
	}
	return dir
}

// ESPImage returns the absolute path of bin/esp.img (make esp): the EFI system partition
// whose GRUB boots the UEFI ISOs Ironic builds, failing the test when it is missing.
func ESPImage(t testing.TB) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "bin", "esp.img")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the ESP image is missing (%v): run make esp", err)
	}
	return path
}

// ReadyLine is the line the guest prints on its console once it has read its first-boot
// config: hostname from the config (testos when it names none), marker the value after
// anvil-marker= in the config's bytes (none when there is none).
func ReadyLine(arch computev1alpha1.Architecture, hostname, marker string) string {
	return fmt.Sprintf("ANVIL-TESTOS-READY arch=%s hostname=%s marker=%s", UnameMachine(arch), hostname, marker)
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
