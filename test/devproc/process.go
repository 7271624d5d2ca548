package devproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// FreePort is a loopback port free now, below the kernel's ephemeral range
// (controlplane.PortBelowEphemeral): anvil dev is killed and started again on the same
// ports, and in between the kernel may give an ephemeral port to any process's outgoing
// connection, which then holds it ("port ... is already in use" on the restart, seen in CI).
func FreePort(t testing.TB) string {
	t.Helper()
	port, err := controlplane.PortBelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// Background starts bin with args as StartProcess does.
func Background(t testing.TB, bin string, args ...string) *controlplane.Process {
	t.Helper()
	return StartProcess(t, exec.Command(bin, args...))
}

// StartProcess starts cmd under internal/controlplane's supervisor, its output in a log
// file printed when the test fails, and dying with the test binary (Pdeathsig). Stop it
// with StopProcess.
func StartProcess(t testing.TB, cmd *exec.Cmd) *controlplane.Process {
	t.Helper()
	dir := t.TempDir()
	p, err := controlplane.StartCommand(filepath.Base(cmd.Path), cmd, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			raw, _ := os.ReadFile(p.LogPath())
			t.Logf("%s %v output:\n%s", cmd.Path, cmd.Args[1:3], raw)
		}
	})
	return p
}

// StopProcess sends SIGTERM and waits for the exit, killing after 30 s.
func StopProcess(p *controlplane.Process) { _ = p.Stop(30 * time.Second) }
