package testos

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/harness"
)

// The ESP build (make esp) gives the same bytes every time, and the image holds a
// removable-media boot loader for each architecture UEFI servers boot.
func TestESPBuildIsReproducible(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var images [2][]byte
	for i := range images {
		if i > 0 {
			// FAT keeps times in 2 s steps: a build's own clock would show after this.
			time.Sleep(2100 * time.Millisecond)
		}
		out := filepath.Join(dir, "esp.img")
		if b, err := exec.Command(filepath.Join(root, "hack", "esp", "build.sh"), out).CombinedOutput(); err != nil {
			t.Fatalf("hack/esp/build.sh: %v\n%s", err, b)
		}
		if images[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			list, err := exec.Command("mdir", "-b", "-i", out, "::/EFI/BOOT").CombinedOutput()
			if err != nil {
				t.Fatalf("mdir: %v\n%s", err, list)
			}
			for _, f := range []string{"BOOTAA64.EFI", "BOOTX64.EFI"} {
				if !strings.Contains(string(list), f) {
					t.Errorf("the ESP lacks EFI/BOOT/%s:\n%s", f, list)
				}
			}
		}
	}
	if !bytes.Equal(images[0], images[1]) {
		t.Error("two builds of the ESP differ")
	}
}
