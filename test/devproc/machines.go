package devproc

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/anvil-dev/anvil/test/guestssh"
)

// Apply applies objects (YAML, many documents) with kubectl, failing tb when it refuses.
func (e Env) Apply(tb testing.TB, kubeconfig, objects string) {
	tb.Helper()
	if out, err := e.Kubectl(tb, kubeconfig, objects, "apply", "-f", "-"); err != nil {
		tb.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// Login waits (15 minutes at most each) until Machine name in the default namespace is
// Running and its SSH address lets id in, and returns the connection; on failure, the end of
// the Machine's console is in the message.
func (e Env) Login(tb testing.TB, kubeconfig, name string, id *guestssh.Identity) *ssh.Client {
	tb.Helper()
	return e.LoginIn(tb, kubeconfig, "default", name, id)
}

// LoginIn is Login for Machine name of namespace.
func (e Env) LoginIn(tb testing.TB, kubeconfig, namespace, name string, id *guestssh.Identity) *ssh.Client {
	tb.Helper()
	e.WaitKubectlFor(tb, kubeconfig, 15*time.Minute, name+" Running", func(s string) bool { return s == "Running" },
		"-n", namespace, "get", "machines.compute.anvil.dev", name, "-o", "jsonpath={.status.state}")
	addr, err := e.Kubectl(tb, kubeconfig, "", "-n", namespace, "get", "machines.compute.anvil.dev", name, "-o", `jsonpath={.status.addresses[?(@.type=="SSH")].address}`)
	if err != nil || addr == "" {
		tb.Fatalf("%s reports no SSH address: %v %q", name, err, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, err := id.Dial(ctx, addr)
	if err != nil {
		tb.Fatalf("%s: %v\nthe end of its console:\n%s", name, err, e.ConsoleEndIn(tb, kubeconfig, namespace, name, 60))
	}
	return c
}

// ConsoleEnd is the last n lines of Machine name's console log (status.console), in the
// default namespace.
func (e Env) ConsoleEnd(tb testing.TB, kubeconfig, name string, n int) string {
	tb.Helper()
	return e.ConsoleEndIn(tb, kubeconfig, "default", name, n)
}

// ConsoleEndIn is ConsoleEnd for Machine name of namespace.
func (e Env) ConsoleEndIn(tb testing.TB, kubeconfig, namespace, name string, n int) string {
	tb.Helper()
	path, _ := e.Kubectl(tb, kubeconfig, "", "-n", namespace, "get", "machines.compute.anvil.dev", name, "-o", "jsonpath={.status.console}")
	b, _ := os.ReadFile(path)
	return LastLines(string(b), n)
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
