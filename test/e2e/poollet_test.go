package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/testos"
)

// A runtime and a poollet started as their own processes, the way a fleet runs them,
// against anvil dev's control plane: the pool appears and runs a Machine.
func TestPoolletAndFakeRuntimeCommands(t *testing.T) {
	state := t.TempDir()
	registryPort := freePort(t)
	d := startDev(t, "--state-dir", state, "--bin-dir", binDir, "--fake-pool", "",
		"--apiserver-port", freePort(t), "--etcd-port", freePort(t), "--etcd-peer-port", freePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-pool=false", "--test-os", testos.Dir(t), "--apply", samplesOnPort(t, registryPort))
	defer d.stop(syscall.SIGTERM)
	kubeconfig := filepath.Join(state, "kubeconfig")

	socket := "unix://" + filepath.Join(t.TempDir(), "edge.sock")
	runtime := background(t, anvilBin, "runtime", "fake", "--name", "edge", "--socket", socket, "--arch", "amd64", "--cpu", "8", "--memory", "16Gi")
	defer stopProcess(runtime)
	// Labelled like anvil dev's fake pool, which the sample web-1 asks for.
	poollet := exec.Command(anvilBin, "poollet", "--pool", "edge", "--runtime", socket, "--interval", "1s", "--labels", "compute.anvil.dev/runtime=fake",
		"--allow-registry", "127.0.0.1:"+registryPort, "--registry-credentials", poolsCredentials(kubeconfig))
	poollet.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	startProcess(t, poollet)
	defer stopProcess(poollet)

	waitKubectl(t, kubeconfig, "True", "get", "machinepool", "edge", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	waitKubectl(t, kubeconfig, "Running", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.state}")
	waitKubectl(t, kubeconfig, "edge", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.pool}")
}

func background(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	startProcess(t, cmd)
	return cmd
}

func startProcess(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(cmd.Path)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			raw, _ := os.ReadFile(log.Name())
			t.Logf("%s %v output:\n%s", cmd.Path, cmd.Args[1:3], raw)
		}
	})
}

func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
	}
}
