package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/testos"
)

// devProcess is one running `anvil dev`, with its output collected as it arrives.
type devProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	mu      sync.Mutex
	output  bytes.Buffer
	upAfter time.Duration
	exited  chan error
}

// The ports are below the kernel's ephemeral range (32768-60999 here): anvil dev is
// killed and started again on the same ports, and in between the kernel may give an
// ephemeral port to any process's outgoing connection, which then holds it ("port ... is
// already in use" on the restart, seen in CI).
func freePort(t *testing.T) string {
	t.Helper()
	for range 100 {
		port := strconv.Itoa(20000 + rand.IntN(12000))
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free port in 20000-31999 after 100 tries")
	return ""
}

// startDev runs anvil dev with args and waits until it says it is up.
func startDev(t *testing.T, args ...string) *devProcess {
	t.Helper()
	d := &devProcess{t: t, exited: make(chan error, 1)}
	d.cmd = exec.Command(anvilBin, append([]string{"dev"}, args...)...)
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.output.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "anvil dev is up") {
				close(up)
			}
		}
	}()
	start := time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { _ = d.cmd.Process.Kill() })
	select {
	case <-up:
		d.upAfter = time.Since(start)
	case err := <-d.exited:
		// Which process holds a port it found taken, to tell a leftover of ours from a
		// stranger.
		sockets, _ := exec.Command("ss", "-tanp").CombinedOutput()
		t.Fatalf("anvil dev exited before it was up (%v):\n%s\nsockets:\n%s", err, d.Output(), sockets)
	case <-time.After(3 * time.Minute):
		t.Fatalf("anvil dev not up after 3 minutes:\n%s", d.Output())
	}
	return d
}

func (d *devProcess) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.output.String()
}

// stop sends sig and requires a clean exit within a minute.
func (d *devProcess) stop(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("anvil dev exited with %v after %s:\n%s", err, sig, d.Output())
		}
	case <-time.After(time.Minute):
		d.t.Fatalf("anvil dev still running a minute after %s:\n%s", sig, d.Output())
	}
}

// kill ends anvil dev as a crash would (SIGKILL) and checks that its etcd and
// kube-apiserver die with it (the kernel kills them: Pdeathsig), so a new start finds their
// ports free. One still there after 30 s is an error; it is killed so the test goes on.
func (d *devProcess) kill(stateDir string) {
	d.t.Helper()
	children := childPIDs(d.t, stateDir)
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatal(err)
	}
	<-d.exited
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range children {
		for running(pid) {
			if time.Now().After(deadline) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				d.t.Errorf("process %d (%s) still runs 30 s after anvil dev was killed: killing it", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
				_ = syscall.Kill(pid, syscall.SIGKILL)
				deadline = time.Now().Add(30 * time.Second)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// running reports whether pid is a live process: not gone, and not a zombie waiting for a
// parent that may never reap it. A killed multi-threaded process (kube-apiserver) shows
// its leader as a zombie while its other threads still exit, holding its files and its
// listening port: it runs until the leader is the only thread left.
func running(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	zombie, threads := false, 0
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			zombie = strings.HasPrefix(strings.TrimSpace(v), "Z")
		}
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return !zombie || threads > 1
}

func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func childPIDs(t *testing.T, stateDir string) []int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(stateDir, "run", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

const keptClass = `apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata:
  name: kept-across-restarts
capabilities:
  cpu: "2"
  memory: 2Gi
`

// samplesOnPort copies config/samples, pointing their images at the registry on port
// instead of anvil dev's default 5001.
func samplesOnPort(t *testing.T, port string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(repoRoot, "config", "samples")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "127.0.0.1:5001/", "127.0.0.1:"+port+"/"))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A user's whole first session: start, see the samples, add an object, have a bad one
// refused, Ctrl-C, start again, and find everything where it was.
func TestDevKeepsObjectsAcrossRestart(t *testing.T) {
	state := t.TempDir()
	registryPort := freePort(t)
	args := []string{"--state-dir", state, "--bin-dir", binDir,
		"--apiserver-port", freePort(t), "--etcd-port", freePort(t), "--etcd-peer-port", freePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-pool=false", "--test-os", testos.Dir(t), "--apply", samplesOnPort(t, registryPort)}
	kubeconfig := filepath.Join(state, "kubeconfig")

	d := startDev(t, args...)
	t.Logf("first start: up after %s", d.upAfter)
	out, err := kubectl(t, kubeconfig, "", "get", "machineclasses", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get machineclasses: %v\n%s", err, out)
	}
	for _, sample := range []string{"small", "medium", "arm-large", "gpu-medium"} {
		if !strings.Contains(out, "machineclass.compute.anvil.dev/"+sample+"\n") {
			t.Errorf("sample MachineClass %s missing from:\n%s", sample, out)
		}
	}
	// The sample Machine runs on the fake pool anvil dev starts.
	waitKubectl(t, kubeconfig, "Running", "get", "machine", "web-1", "-n", "default", "-o", "jsonpath={.status.state}")
	waitKubectl(t, kubeconfig, "True", "get", "machinepool", "dev-fake", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if out, err := kubectl(t, kubeconfig, keptClass, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	bad := strings.ReplaceAll(strings.ReplaceAll(keptClass, "kept-across-restarts", "bad"), `cpu: "2"`, `cpu: "-2"`)
	out, err = kubectl(t, kubeconfig, bad, "apply", "-f", "-")
	if err == nil || !strings.Contains(out, "every capability must be a positive quantity") {
		t.Fatalf("a negative cpu was not refused with a clear message: %v\n%s", err, out)
	}

	pids := childPIDs(t, state)
	if len(pids) != 2 {
		t.Fatalf("pid files %v, want etcd and kube-apiserver", pids)
	}
	d.stop(syscall.SIGINT)
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("child process %d still runs after anvil dev stopped", pid)
		}
	}

	d = startDev(t, args...)
	t.Logf("second start: up after %s", d.upAfter)
	if !strings.Contains(d.Output(), "samples         0 created, ") {
		t.Errorf("second start re-created samples or did not say so:\n%s", d.Output())
	}
	out, err = kubectl(t, kubeconfig, "", "get", "machineclass", "kept-across-restarts", "-o", "jsonpath={.capabilities.memory}")
	if err != nil || out != "2Gi" {
		t.Fatalf("object created before the restart: %v %q", err, out)
	}
	d.stop(syscall.SIGTERM)
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
		{"busy apiserver port", []string{"--bin-dir", binDir, "--apiserver-port", busy}, []string{"already in use", "--apiserver-port"}},
		{"busy registry port", []string{"--bin-dir", binDir, "--apiserver-port", freePort(t), "--registry-port", busy}, []string{"already in use", "--registry-port"}},
		{"missing binaries", []string{"--bin-dir", t.TempDir(), "--apiserver-port", freePort(t)}, []string{"not found in", "make tools"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"dev", "--state-dir", t.TempDir(), "--etcd-port", freePort(t), "--etcd-peer-port", freePort(t),
				"--registry-port", freePort(t)}, tc.args...)
			out, err := exec.Command(anvilBin, args...).CombinedOutput()
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

// waitKubectl runs kubectl until its output is want, for up to a minute.
func waitKubectl(t *testing.T, kubeconfig, want string, args ...string) {
	t.Helper()
	waitKubectlFor(t, kubeconfig, time.Minute, "be "+strconv.Quote(want), func(out string) bool { return out == want }, args...)
}

// waitKubectlFor runs kubectl until its trimmed output satisfies ok, for up to limit.
func waitKubectlFor(t *testing.T, kubeconfig string, limit time.Duration, what string, ok func(string) bool, args ...string) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ = kubectl(t, kubeconfig, "", args...)
		if ok(strings.TrimSpace(out)) {
			return
		}
	}
	t.Fatalf("kubectl %v printed %q within %s; want it to %s", args, out, limit, what)
}
