package devproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Dev is one running `anvil dev`, with its output collected as it arrives.
type Dev struct {
	// UpAfter is how long it took to say it is up.
	UpAfter time.Duration
	t       testing.TB
	cmd     *exec.Cmd
	mu      sync.Mutex
	output  bytes.Buffer
	exited  chan error
	// stateDir is its --state-dir: its own log is logs/anvil.log there.
	stateDir string
}

// StartDev runs anvil dev with args and waits until it says it is up. The test's cleanup
// kills it if it still runs.
func (e Env) StartDev(t testing.TB, args ...string) *Dev {
	t.Helper()
	d := &Dev{t: t, exited: make(chan error, 1), stateDir: ".anvil"}
	for i, a := range args {
		if a == "--state-dir" && i+1 < len(args) {
			d.stateDir = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--state-dir="); ok {
			d.stateDir = v
		}
	}
	d.cmd = exec.Command(e.AnvilBin, append([]string{"dev"}, args...)...)
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
		d.UpAfter = time.Since(start)
	case err := <-d.exited:
		// Which process holds a port it found taken, to tell a leftover of ours from a
		// stranger.
		sockets, _ := exec.Command("ss", "-tanp").CombinedOutput()
		t.Fatalf("anvil dev exited before it was up (%v):\n%s\nsockets:\n%s", err, d.report(), sockets)
	case <-time.After(3 * time.Minute):
		t.Fatalf("anvil dev not up after 3 minutes:\n%s", d.report())
	}
	return d
}

// PID is its process id.
func (d *Dev) PID() int { return d.cmd.Process.Pid }

// Output is what anvil dev printed so far.
func (d *Dev) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.output.String()
}

// report is what a failure shows: the terminal's output, then the end of anvil dev's log.
func (d *Dev) report() string {
	raw, err := os.ReadFile(filepath.Join(d.stateDir, "logs", "anvil.log"))
	if err != nil {
		return d.Output() + "\n(no anvil.log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return d.Output() + "\nthe end of logs/anvil.log:\n" + strings.Join(lines[max(0, len(lines)-60):], "\n")
}

// Stop sends sig and requires a clean exit within a minute.
func (d *Dev) Stop(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("anvil dev exited with %v after %s:\n%s", err, sig, d.report())
		}
	case <-time.After(time.Minute):
		d.t.Fatalf("anvil dev still running a minute after %s:\n%s", sig, d.report())
	}
}

// Kill ends anvil dev as a crash would (SIGKILL) and checks that its etcd and
// kube-apiserver die with it (the kernel kills them: Pdeathsig), so a new start finds their
// ports free. One still there after 30 s is an error; it is killed so the test goes on.
func (d *Dev) Kill(stateDir string) {
	d.t.Helper()
	children := ChildPIDs(d.t, stateDir)
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatal(err)
	}
	<-d.exited
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range children {
		for Running(pid) {
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

// Running reports whether pid is a live process: not gone, and not a zombie waiting for a
// parent that may never reap it. A killed multi-threaded process (kube-apiserver) shows
// its leader as a zombie while its other threads still exit, holding its files and its
// listening port: it runs until the leader is the only thread left.
func Running(pid int) bool {
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

// PoolsCredentials is the pools' read credential of the registry of the anvil dev whose
// kubeconfig this is (a docker config in its state folder), for the fleet processes a test
// starts beside it (--registry-credentials).
func PoolsCredentials(kubeconfig string) string {
	return filepath.Join(filepath.Dir(kubeconfig), "registry-read.json")
}

// ChildPIDs are the pids anvil dev wrote for its etcd and kube-apiserver in stateDir/run.
func ChildPIDs(t testing.TB, stateDir string) []int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(stateDir, "run", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		pid, err := PIDFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// PIDFile reads the pid a pid file holds.
func PIDFile(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}
