package devproc

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
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

// ConsoleEnd is the last n lines of Machine name's console log, read through the console
// API (docs/console.md), in the default namespace.
func (e Env) ConsoleEnd(tb testing.TB, kubeconfig, name string, n int) string {
	tb.Helper()
	return e.ConsoleEndIn(tb, kubeconfig, "default", name, n)
}

// ConsoleEndIn is ConsoleEnd for Machine name of namespace; what the API answered when it
// refuses.
func (e Env) ConsoleEndIn(tb testing.TB, kubeconfig, namespace, name string, n int) string {
	tb.Helper()
	log, err := e.ConsoleLog(tb, kubeconfig, namespace, name)
	if err != nil {
		return err.Error()
	}
	return LastLines(log, n)
}

// ConsoleLog is Machine namespace/name's console log so far, as kubectl get --raw reads
// it from the console API.
func (e Env) ConsoleLog(tb testing.TB, kubeconfig, namespace, name string) (string, error) {
	tb.Helper()
	cmd := exec.Command(filepath.Join(e.BinDir, "kubectl"), "--kubeconfig", kubeconfig, "get", "--raw", ConsoleLogPath(namespace, name))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output() // stdout alone: the log, without kubectl's warnings
	if err != nil {
		return string(out), fmt.Errorf("console log of Machine %s/%s: %w: %s", namespace, name, err, stderr.String())
	}
	return string(out), nil
}

// ConsoleLogPath is the API path of Machine namespace/name's console log.
func ConsoleLogPath(namespace, name string) string {
	return "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/" + namespace + "/machines/" + name + "/consolelog"
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// QemuMachineDir is the folder on this host where the anvil dev run in state keeps the VM
// of Machine namespace/name (its console log, QEMU's pid file and log): for tests of the
// host's side. Tenants read consoles through the API; the Machine does not say where.
func (e Env) QemuMachineDir(tb testing.TB, kubeconfig, state, namespace, name string) string {
	tb.Helper()
	out, err := e.Kubectl(tb, kubeconfig, "", "-n", namespace, "get", "machines.compute.anvil.dev", name, "-o", "jsonpath={.status.architecture} {.status.machineID}")
	arch, id, ok := strings.Cut(strings.TrimSpace(out), " ")
	if err != nil || !ok || arch == "" || id == "" {
		tb.Fatalf("Machine %s/%s: architecture and id %q (%v); want both", namespace, name, out, err)
	}
	return dev.QemuMachineDir(state, computev1alpha1.Architecture(arch), id)
}
