package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
)

// Paths every test here uses, set up once by TestMain.
var (
	env      devproc.Env
	repoRoot string
	binDir   string // kube-apiserver, etcd, kubectl
	anvilBin string // built from this checkout for this run
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var cleanup func()
	var err error
	env, cleanup, err = devproc.Prepare()
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	repoRoot, binDir, anvilBin = env.RepoRoot, env.BinDir, env.AnvilBin
	return m.Run()
}
