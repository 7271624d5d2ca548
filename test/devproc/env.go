package devproc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
)

// Env is where a test package's programs are: passed to what starts them, never kept in
// this package's globals, so two test packages can each build their own.
type Env struct {
	// RepoRoot is the checkout the anvil binary was built from.
	RepoRoot string
	// AnvilBin is the anvil binary built for this run.
	AnvilBin string
	// BinDir holds kube-apiserver, etcd and kubectl (make tools).
	BinDir string
}

// prepare builds anvil from this checkout into a fresh folder and finds the tools, for a
// test package's TestMain; cleanup removes the folder. The folder is open to every user:
// anvil dev's QEMU drops to an unprivileged user (anvil-qemu) and runs `anvil forward` as
// that user for the builders' registry forward.
func prepare() (env Env, cleanup func(), err error) {
	cleanup = func() {}
	if env.RepoRoot, err = harness.RepoRoot(); err != nil {
		return env, cleanup, err
	}
	if env.BinDir, err = harness.AssetsDir(); err != nil {
		return env, cleanup, err
	}
	if _, err := os.Stat(filepath.Join(env.BinDir, "kubectl")); err != nil {
		return env, cleanup, fmt.Errorf("kubectl is missing from %s: run \"make tools\"", env.BinDir)
	}
	tmp, err := os.MkdirTemp("", "anvil-e2e-")
	if err != nil {
		return env, cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if err := os.Chmod(tmp, 0o755); err != nil {
		return env, cleanup, err
	}
	env.AnvilBin, err = harness.AnvilBinary(tmp)
	return env, cleanup, err
}

// Main is a test package's TestMain body: it prepares *env, runs the package's tests and
// returns their exit code; a failed preparation is printed under pkg's name and fails all.
func Main(m *testing.M, pkg string, env *Env) int {
	prepared, cleanup, err := prepare()
	defer cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", pkg, err)
		return 1
	}
	*env = prepared
	return m.Run()
}
