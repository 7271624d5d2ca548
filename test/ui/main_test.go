package ui

import (
	"os"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
)

// env is the anvil binary built for this run and the tools, set up once by TestMain.
var env devproc.Env

func TestMain(m *testing.M) {
	os.Exit(devproc.Main(m, "ui e2e", &env))
}
