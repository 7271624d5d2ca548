package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one supervised child: its output goes to a log file, its pid to a pid file
// while it runs, and it dies with its parent (Pdeathsig) so a killed anvil leaves no
// orphan holding the ports or the etcd data directory. That signal is SIGKILL: with the
// parent gone nobody waits for a graceful stop, and kube-apiserver, sent SIGTERM while etcd
// went away with it, was seen still holding its port 30 s later, failing the next start.
// etcd's write-ahead log makes a kill safe; the parent's own stop still uses SIGTERM.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	pidPath string
	done    chan struct{}
	err     error // valid once done is closed
}

func startProcess(name, bin string, args []string, logDir, runDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A process group of its own keeps a terminal's Ctrl-C away from the child, so the
	// parent stops children in order (apiserver before etcd) instead of all at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{
		name: name, cmd: cmd, logPath: logPath,
		pidPath: filepath.Join(runDir, name+".pid"),
		done:    make(chan struct{}),
	}
	if err := writeFile(p.pidPath, []byte(strconv.Itoa(cmd.Process.Pid))); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		return nil, fmt.Errorf("recording the pid of %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		_ = os.Remove(p.pidPath)
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to end with SIGTERM and kills it if it has not ended after grace.
func (p *process) stop(grace time.Duration) error {
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

// exitError describes an unexpected exit, with the end of the log to say why.
func (p *process) exitError() error {
	<-p.done
	msg := fmt.Sprintf("%s exited", p.name)
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		msg = fmt.Sprintf("%s exited with %s", p.name, ee.ProcessState)
	}
	return fmt.Errorf("%s; last lines of %s:\n%s", msg, p.logPath, LogTail(p.logPath, 15))
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// LogTail is the last n lines of the log file at path, for an error that says why a
// process ended or never became healthy.
func LogTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
