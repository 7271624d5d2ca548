package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// A runtime and a poollet started as their own processes, the way a fleet runs them,
// against anvil dev's control plane: the pool appears and runs a Machine.
func TestPoolletAndFakeRuntimeCommands(t *testing.T) {
	state := t.TempDir()
	registryPort := devproc.FreePort(t)
	d := env.StartDev(t, "--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "",
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-pool=false", "--test-os", testos.Dir(t), "--apply", env.Samples(t, "config/samples", registryPort))
	defer d.Stop(syscall.SIGTERM)
	kubeconfig := filepath.Join(state, "kubeconfig")

	socket := "unix://" + filepath.Join(t.TempDir(), "edge.sock")
	runtime := devproc.Background(t, env.AnvilBin, "runtime", "fake", "--pool", "edge", "--listen", socket, "--arch", "amd64", "--cpu", "8", "--memory", "16Gi")
	defer devproc.StopProcess(runtime)
	// Labelled like anvil dev's fake pool, which the sample web-1 asks for.
	poolletCmd := exec.Command(env.AnvilBin, "poollet", "--pool", "edge", "--runtime", socket, "--interval", "1s", "--labels", "compute.anvil.dev/runtime=fake",
		"--allow-registry", "127.0.0.1:"+registryPort, "--registry-credentials", devproc.PoolsCredentials(kubeconfig))
	poolletCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	poollet := devproc.StartProcess(t, poolletCmd)
	defer devproc.StopProcess(poollet)

	env.WaitKubectl(t, kubeconfig, "True", "get", "machinepool", "edge", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	env.WaitKubectl(t, kubeconfig, "Running", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.state}")
	env.WaitKubectl(t, kubeconfig, "edge", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.pool}")
}
