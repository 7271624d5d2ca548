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

// stopGrace is how long a program gets to end after SIGTERM before SIGKILL on Stop. One
// that stopped answering is killed at once: Ironic without its database takes a minute to
// shut down, and its conductor frees its own locks when it starts again.
const stopGrace = 10 * time.Second

// proc is one run of a supervised program.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	exited  chan struct{} // closed once the process has been waited for
	err     error         // Wait's result, set before exited is closed
}

// startProcess starts the program in its own process group and records its pid.
func (s *service) startProcess() (*proc, error) {
	cmd := exec.Command(s.bin, "--config-file", s.conf)
	cmd.Dir = s.dir
	// SQLAlchemy's deprecation warnings about Ironic's own code, on every query shape.
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore")
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so Stop reaches anything it spawns (ipmitool...).
		Setpgid: true,
		// No program may outlive anvil; a restarted anvil also ends a leftover one
		// through the pid file (killStale).
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.name, err)
	}
	pr := &proc{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), exited: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.exited)
	}()
	_ = writeFile(s.pidFile, strconv.Itoa(pr.pid)+"\n")
	return pr, nil
}

// startAndWait starts the program and waits until its API answers, or fails with the end
// of its log when the process ends or does not answer within startTimeout.
func (s *service) startAndWait(ctx context.Context) (*proc, error) {
	pr, err := s.startProcess()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-pr.exited:
			return nil, fmt.Errorf("%s exited while starting (%v); the end of %s:\n%s", s.name, pr.err, s.logPath, tail(s.logPath, 20))
		case <-ctx.Done():
			s.terminate(pr, 0)
			return nil, fmt.Errorf("%s did not answer on %s within %s (%w); the end of %s:\n%s",
				s.name, s.endpoint, s.startTimeout, ctx.Err(), s.logPath, tail(s.logPath, 20))
		case <-tick.C:
			if s.healthy(ctx) {
				return pr, nil
			}
		}
	}
}

// terminate sends the process group SIGTERM (unless grace is 0), SIGKILL after grace, and
// waits for the process. The group is killed once more after the leader ended, for
// children it left.
func (s *service) terminate(pr *proc, grace time.Duration) {
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

// killStale ends the program named by pidFile when that process is still running with
// the configuration file conf: a previous anvil started it and died.
func killStale(pidFile, conf string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !bytes.Contains(cmdline, []byte(conf)) {
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
