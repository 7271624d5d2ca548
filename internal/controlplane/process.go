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

// Process is one supervised child: its output goes to a log file, its pid to a pid file
// (when StartProcess is given a runDir) while it runs, and it dies with its parent (Pdeathsig) so a killed anvil leaves no
// orphan holding the ports or the etcd data directory. That signal is SIGKILL: with the
// parent gone nobody waits for a graceful stop, and kube-apiserver, sent SIGTERM while etcd
// went away with it, was seen still holding its port 30 s later, failing the next start.
// etcd's write-ahead log makes a kill safe; the parent's own stop still uses SIGTERM.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	pidPath string
	done    chan struct{}
	err     error // valid once done is closed
}

// StartProcess starts bin with args, its log in logDir/NAME.log and, when runDir is not
// empty, its pid in runDir/NAME.pid.
func StartProcess(name, bin string, args []string, logDir, runDir string) (*Process, error) {
	return StartCommand(name, exec.Command(bin, args...), logDir, runDir)
}

// StartCommand is StartProcess for a command its caller made (its environment, its working
// folder); its output and process attributes are set here. The log is appended to, so a
// process started again under the same name keeps the earlier runs' output.
func StartCommand(name string, cmd *exec.Cmd, logDir, runDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A process group of its own keeps a terminal's Ctrl-C away from the child, so the
	// parent stops children in order (apiserver before etcd) instead of all at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	if runDir != "" {
		p.pidPath = filepath.Join(runDir, name+".pid")
	}
	if err := p.writePID(); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		return nil, fmt.Errorf("recording the pid of %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		if p.pidPath != "" {
			_ = os.Remove(p.pidPath)
		}
		close(p.done)
	}()
	return p, nil
}

// writePID records the pid in the pid file, if the process has one.
func (p *Process) writePID() error {
	if p.pidPath == "" {
		return nil
	}
	return writeFile(p.pidPath, []byte(strconv.Itoa(p.cmd.Process.Pid)))
}

// Stop asks the process to end with SIGTERM and kills it if it has not ended after grace;
// nil when p is nil (never started) or already ended.
func (p *Process) Stop(grace time.Duration) error {
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

// Kill ends the process with SIGKILL, as a crash would, and returns once it is reaped;
// nothing when p is nil or already ended.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// exitError describes an unexpected exit, with the end of the log to say why.
func (p *Process) exitError() error {
	<-p.done
	msg := fmt.Sprintf("%s exited", p.name)
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		msg = fmt.Sprintf("%s exited with %s", p.name, ee.ProcessState)
	}
	return fmt.Errorf("%s; last lines of %s:\n%s", msg, p.logPath, LogTail(p.logPath, 15))
}

// LogPath is the file its output goes to.
func (p *Process) LogPath() string { return p.logPath }

// PID is the process's pid.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is nil while the process runs, else why it ended, with the end of its log.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return p.exitError()
	default:
		return nil
	}
}

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
