package ironic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long Ironic gets to end after SIGTERM before SIGKILL on Stop. An Ironic
// that stopped answering is killed at once: without its database it takes a minute to
// shut down, and its conductor frees its own locks when it starts again.
const stopGrace = 10 * time.Second

// proc is one run of the ironic process.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	exited  chan struct{} // closed once the process has been waited for
	err     error         // Wait's result, set before exited is closed
}

// startProcess starts ironic in its own process group and records its pid.
func (i *Ironic) startProcess() (*proc, error) {
	cmd := exec.Command(i.bin, "--config-file", i.p.conf)
	cmd.Dir = i.p.dir
	// SQLAlchemy's deprecation warnings about Ironic's own code, on every query shape.
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore")
	cmd.Stdout = i.out
	cmd.Stderr = i.out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so Stop reaches anything it spawns (ipmitool...).
		Setpgid: true,
		// Ironic must not outlive anvil; a restarted anvil also ends a leftover one
		// through the pid file (killStale).
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting ironic: %w", err)
	}
	pr := &proc{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), exited: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.exited)
	}()
	_ = writeFile(i.p.pid, strconv.Itoa(pr.pid)+"\n")
	return pr, nil
}

// startAndWait starts ironic and waits until the API answers, or fails with the end of
// ironic.log when the process ends or does not answer within StartTimeout.
func (i *Ironic) startAndWait(ctx context.Context) (*proc, error) {
	pr, err := i.startProcess()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, i.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-pr.exited:
			return nil, fmt.Errorf("ironic exited while starting (%v); the end of %s:\n%s", pr.err, i.p.log, tail(i.p.log, 20))
		case <-ctx.Done():
			i.terminate(pr, 0)
			return nil, fmt.Errorf("ironic did not answer on %s within %s (%w); the end of %s:\n%s",
				i.endpoint, i.cfg.StartTimeout, ctx.Err(), i.p.log, tail(i.p.log, 20))
		case <-tick.C:
			if i.Healthy(ctx) {
				return pr, nil
			}
		}
	}
}

// terminate sends the process group SIGTERM (unless grace is 0), SIGKILL after grace, and
// waits for the process. The group is killed once more after the leader ended, for
// children it left.
func (i *Ironic) terminate(pr *proc, grace time.Duration) {
	if grace > 0 {
		_ = syscall.Kill(-pr.pid, syscall.SIGTERM)
		select {
		case <-pr.exited:
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
	<-pr.exited
	_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
}

// killStale ends the Ironic named by the pid file when that process is still running with
// this state directory's configuration: a previous anvil started it and died.
func killStale(p paths) {
	b, err := os.ReadFile(p.pid)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !bytes.Contains(cmdline, []byte(p.conf)) {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		// A zombie whose parent is gone is reaped by init; until then it holds nothing.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && bytes.Contains(st, []byte(") Z ")) {
			return
		}
	}
}
