package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// AnvilBinaryEnv names a prebuilt anvil binary of this checkout: hack/test.sh builds one
// for the whole run, so the packages that run anvil as processes link it once, not once
// each (a link of cmd/anvil is some 15 s of a core).
const AnvilBinaryEnv = "ANVIL_TEST_BINARY"

// AnvilBinary is the anvil binary a test runs: AnvilBinaryEnv's when set, else cmd/anvil of
// this checkout built into dir. The caller keeps dir readable by every user when anvil
// runs as another (QEMU's user runs anvil forward).
func AnvilBinary(dir string) (string, error) {
	if bin := os.Getenv(AnvilBinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s names no binary: %w", AnvilBinaryEnv, err)
		}
		return bin, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "anvil")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/anvil")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building anvil: %w\n%s", err, out)
	}
	return bin, nil
}
