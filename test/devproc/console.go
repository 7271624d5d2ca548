package devproc

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/testos"
)

// Console is a running anvil console (docs/console.md), its output kept.
type Console struct {
	cmd *exec.Cmd
	// Stdin is what is typed.
	Stdin io.WriteCloser
	out   testos.SyncBuffer
	done  chan error
}

// StartConsole runs anvil console for Machine ns/name with kubeconfig (more flags after);
// it is killed when t ends, if still running.
func (e Env) StartConsole(t *testing.T, kubeconfig, ns, name string, more ...string) *Console {
	t.Helper()
	p := &Console{done: make(chan error, 1)}
	p.cmd = exec.Command(e.AnvilBin, append([]string{"console", name, "--kubeconfig", kubeconfig, "-n", ns}, more...)...)
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin = stdin
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(p.Stop)
	return p
}

// Output is what it printed so far.
func (p *Console) Output() string { return p.out.String() }

// Await waits (30 s at most) until it printed want.
func (p *Console) Await(t *testing.T, want string) {
	t.Helper()
	if !p.AwaitWithin(want, 30*time.Second) {
		t.Fatalf("anvil console %v never printed %q:\n%s", p.cmd.Args[2:], want, p.Output())
	}
}

// AwaitWithin reports whether it printed want within limit.
func (p *Console) AwaitWithin(want string, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(p.Output(), want) {
			return true
		}
	}
	return false
}

// Wait waits (30 s at most) for it to end and returns how.
func (p *Console) Wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("still running 30s later")
	}
}

// Stop kills it unless it has ended.
func (p *Console) Stop() {
	select {
	case err := <-p.done:
		p.done <- err
	default:
		_ = p.cmd.Process.Kill()
	}
}
