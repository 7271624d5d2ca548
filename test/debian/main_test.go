package debian

import (
	"fmt"
	"os"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
)

// env is this package's anvil binary and tools, built once by TestMain.
var env devproc.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var cleanup func()
	var err error
	env, cleanup, err = devproc.Prepare()
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "debian:", err)
		return 1
	}
	return m.Run()
}
