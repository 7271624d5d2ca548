package cli

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

const keptClass = `apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata:
  name: kept-across-restarts
capabilities:
  cpu: "2"
  memory: 2Gi
`

// A user's whole first session: start, see the samples, add an object, have a bad one
// refused, Ctrl-C, start again, and find everything where it was.
func TestDevKeepsObjectsAcrossRestart(t *testing.T) {
	state := t.TempDir()
	registryPort := devproc.FreePort(t)
	args := []string{"--state-dir", state, "--bin-dir", env.BinDir,
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-pool=false", "--test-os", testos.Dir(t), "--apply", env.Samples(t, "config/samples", registryPort)}
	kubeconfig := filepath.Join(state, "kubeconfig")

	d := env.StartDev(t, args...)
	t.Logf("first start: up after %s", d.UpAfter)
	out, err := env.Kubectl(t, kubeconfig, "", "get", "machineclasses", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get machineclasses: %v\n%s", err, out)
	}
	for _, sample := range []string{"small", "medium", "arm-large", "gpu-medium"} {
		if !strings.Contains(out, "machineclass.compute.anvil.dev/"+sample+"\n") {
			t.Errorf("sample MachineClass %s missing from:\n%s", sample, out)
		}
	}
	// The terminal has the banner, not the processes' JSON logs: those are in the state folder.
	for _, line := range strings.Split(d.Output(), "\n") {
		if strings.HasPrefix(line, "{") {
			t.Errorf("a log line on anvil dev's terminal: %s", line)
			break
		}
	}
	if st, err := os.Stat(filepath.Join(state, "logs", "anvil.log")); err != nil || st.Size() == 0 {
		t.Errorf("anvil dev's log %s/logs/anvil.log: %v (empty: %v)", state, err, err == nil && st.Size() == 0)
	}
	// The shipped tenant roles are there to bind, as docs/security.md tells tenants.
	if out, err := env.Kubectl(t, kubeconfig, "", "get", "clusterroles", "anvil-tenant", "anvil-tenant-view", "anvil-machineclass-reader", "-o", "name"); err != nil {
		t.Errorf("the tenant roles: %v\n%s", err, out)
	}
	// The sample Machine runs on the fake pool anvil dev starts.
	env.WaitKubectl(t, kubeconfig, "Running", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.state}")
	env.WaitKubectl(t, kubeconfig, "True", "get", "machinepool", "dev-fake", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	checkConsoleLog(t, kubeconfig)
	checkConsole(t, kubeconfig)
	if out, err := env.Kubectl(t, kubeconfig, keptClass, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	bad := strings.ReplaceAll(strings.ReplaceAll(keptClass, "kept-across-restarts", "bad"), `cpu: "2"`, `cpu: "-2"`)
	out, err = env.Kubectl(t, kubeconfig, bad, "apply", "-f", "-")
	if err == nil || !strings.Contains(out, "every capability must be a positive quantity") {
		t.Fatalf("a negative cpu was not refused with a clear message: %v\n%s", err, out)
	}

	pids := devproc.ChildPIDs(t, state)
	if len(pids) != 2 {
		t.Fatalf("pid files %v, want etcd and kube-apiserver", pids)
	}
	d.Stop(syscall.SIGINT)
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("child process %d still runs after anvil dev stopped", pid)
		}
	}

	d = env.StartDev(t, args...)
	t.Logf("second start: up after %s", d.UpAfter)
	if !strings.Contains(d.Output(), "samples         0 created, ") {
		t.Errorf("second start re-created samples or did not say so:\n%s", d.Output())
	}
	out, err = env.Kubectl(t, kubeconfig, "", "get", "machineclass", "kept-across-restarts", "-o", "jsonpath={.capabilities.memory}")
	if err != nil || out != "2Gi" {
		t.Fatalf("object created before the restart: %v %q", err, out)
	}
	// The console server starts anew (new port, new CA) and registers itself again.
	checkConsoleLog(t, kubeconfig)
	d.Stop(syscall.SIGTERM)
}

func TestDevRefusesBusyPortAndMissingBinary(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"busy apiserver port", []string{"--bin-dir", env.BinDir, "--apiserver-port", busy}, []string{"already in use", "--apiserver-port"}},
		{"busy registry port", []string{"--bin-dir", env.BinDir, "--apiserver-port", devproc.FreePort(t), "--registry-port", busy}, []string{"already in use", "--registry-port"}},
		{"missing binaries", []string{"--bin-dir", t.TempDir(), "--apiserver-port", devproc.FreePort(t)}, []string{"not found in", "make tools"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"dev", "--state-dir", t.TempDir(), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
				"--registry-port", devproc.FreePort(t)}, tc.args...)
			out, err := exec.Command(env.AnvilBin, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("anvil dev started; want a refusal:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}
