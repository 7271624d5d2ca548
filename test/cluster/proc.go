package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// proc is one process the node runs, its output in Dir/logs/NAME.log. It dies with the
// test process (Pdeathsig); Stop still kills what a killed run left, from the snapshot.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // valid once done is closed
}

func startProc(logDir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) record() process {
	return process{PID: p.cmd.Process.Pid, Cmdline: cmdline(p.cmd.Process.Pid)}
}

// exited is nil while the process runs, else why it ended with the end of its log.
func (p *proc) exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	msg := p.name + " exited"
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		msg = fmt.Sprintf("%s exited with %s", p.name, ee.ProcessState)
	}
	return fmt.Errorf("%s; last lines of %s:\n%s", msg, p.logPath, controlplane.LogTail(p.logPath, 20))
}

// stop sends SIGTERM and kills after grace; nil when p is nil or already ended.
func (p *proc) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, grace)
	}
}
