package devproc

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Kubectl runs kubectl with kubeconfig, stdin and args, and returns its combined output.
func (e Env) Kubectl(t testing.TB, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.BinDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitKubectl runs kubectl until its output is want, for up to a minute.
func (e Env) WaitKubectl(t testing.TB, kubeconfig, want string, args ...string) {
	t.Helper()
	e.WaitKubectlFor(t, kubeconfig, time.Minute, "be "+strconv.Quote(want), func(out string) bool { return out == want }, args...)
}

// WaitKubectlFor runs kubectl until its trimmed output satisfies ok, for up to limit.
func (e Env) WaitKubectlFor(t testing.TB, kubeconfig string, limit time.Duration, what string, ok func(string) bool, args ...string) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ = e.Kubectl(t, kubeconfig, "", args...)
		if ok(strings.TrimSpace(out)) {
			return
		}
	}
	t.Fatalf("kubectl %v printed %q within %s; want it to %s", args, out, limit, what)
}
