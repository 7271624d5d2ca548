package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
)

// Paths every test here uses, set up once by TestMain.
var (
	repoRoot string
	binDir   string // kube-apiserver, etcd, kubectl
	anvilBin string // built from this checkout for this run
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = harness.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if binDir, err = harness.AssetsDir(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(binDir, "kubectl")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: kubectl is missing from %s: run \"make tools\"\n", binDir)
		return 1
	}
	tmp, err := os.MkdirTemp("", "anvil-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// anvil dev's QEMU drops to an unprivileged user (anvil-qemu) and runs `anvil forward`
	// as that user for the builders' registry forward: the folder must be open to it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	anvilBin = filepath.Join(tmp, "anvil")
	build := exec.Command("go", "build", "-o", anvilBin, "./cmd/anvil")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building anvil:", err)
		return 1
	}
	return m.Run()
}
