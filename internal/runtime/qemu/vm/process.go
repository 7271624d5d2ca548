package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a QEMU process the runtime started or found again.
type Process struct {
	PID int
	// exited is closed when a process this runtime started has been reaped; nil for a
	// process found again after a restart (it is not our child).
	exited chan struct{}
}

// Exited is closed once a process started by Launch has ended; nil for an adopted one.
func (p *Process) Exited() <-chan struct{} {
	if p.exited == nil {
		return nil
	}
	return p.exited
}

// Launch starts QEMU in a session of its own, so it outlives the runtime and no signal
// for the runtime's process group reaches it. QEMU's own output is appended to logPath.
// While the runtime lives it reaps the process; after a restart init does.
func Launch(program string, args []string, logPath string) (*Process, error) {
	bin, err := exec.LookPath(program)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed: %w", program, err)
	}
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own copy
	fmt.Fprintf(log, "--- %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(append([]string{bin}, args...), " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = filepath.Dir(logPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", program, err)
	}
	p := &Process{PID: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Find returns the QEMU process serving qmpSocket: the pid in pidFile when /proc confirms
// it, otherwise any QEMU whose command line names the socket (QEMU writes its pid file
// early but not at once). ok is false when no such process runs.
func Find(pidFile, qmpSocket string) (p *Process, ok bool) {
	if raw, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && Serves(pid, qmpSocket) {
			return &Process{PID: pid}, true
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if Serves(pid, qmpSocket) {
			return &Process{PID: pid}, true
		}
	}
	return nil, false
}

// Serves reports whether pid is a live (not zombie) QEMU whose command line names
// qmpSocket as its QMP socket: the check before any signal, so a reused pid is never hit.
func Serves(pid int, qmpSocket string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if len(argv) == 0 || !strings.HasPrefix(filepath.Base(argv[0]), "qemu-system-") {
		return false
	}
	want := "unix:" + optionValue(qmpSocket) + ","
	for i, a := range argv {
		if a == "-qmp" && i+1 < len(argv) && strings.HasPrefix(argv[i+1], want) {
			return true
		}
	}
	return false
}

// Alive reports whether p still runs as the QEMU of qmpSocket.
func (p *Process) Alive(qmpSocket string) bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
		}
	}
	return Serves(p.PID, qmpSocket)
}

// Kill ends p: SIGTERM (QEMU exits cleanly; a stopped one is continued to take it), then
// SIGKILL after grace. It signals only while /proc shows p is still the QEMU of
// qmpSocket, and returns once it is gone.
func (p *Process) Kill(qmpSocket string, grace time.Duration) error {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if !p.Alive(qmpSocket) {
			return nil
		}
		if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signalling QEMU %d: %w", p.PID, err)
		}
		if sig == syscall.SIGTERM {
			// A stopped QEMU (SIGSTOP: a hung machine) takes SIGTERM only once continued:
			// continued, it ends at once instead of waiting out the grace for SIGKILL.
			_ = syscall.Kill(p.PID, syscall.SIGCONT)
		}
		if p.wait(qmpSocket, grace) {
			return nil
		}
	}
	if p.wait(qmpSocket, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("QEMU %d survived SIGKILL", p.PID)
}

// wait polls until p is gone or d has passed; it reports whether p is gone. Gone means
// its files are closed too: an exiting process loses its memory (its command line reads
// empty, so it no longer shows as QEMU) before its files, and a QEMU started at once on the
// same folder found the pid file still locked (seen in internal/bmcemu's restart test).
func (p *Process) wait(qmpSocket string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for p.Alive(qmpSocket) || exiting(p.PID) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// exiting says whether pid is a process part way through its exit: its command line reads
// empty (its memory is gone) but it is not yet a zombie (its files may still be open).
func exiting(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if state, ok := procState(string(stat)); !ok || state == 'Z' || state == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && len(cmdline) == 0
}

// procState is the state letter of a /proc/<pid>/stat line: the field after the command
// name, which is in parentheses and may itself hold spaces and parentheses.
func procState(stat string) (byte, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, false
	}
	return stat[i+2], true
}
