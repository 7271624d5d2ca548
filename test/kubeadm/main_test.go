package kubeadm

import (
	"os"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
)

// env is this package's anvil binary and tools, built once by TestMain.
var env devproc.Env

func TestMain(m *testing.M) {
	os.Exit(devproc.Main(m, "kubeadm", &env))
}
