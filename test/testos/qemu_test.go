package testos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Generous: two cores are shared by every test package and agent, and QEMU emulates the CPU.
const (
	markerDeadline   = 120 * time.Second
	powerOffDeadline = 60 * time.Second
)

// vm is one QEMU process a test started, on the command line of the package doc.
type vm struct {
	cmd     *exec.Cmd
	serial  string
	qmp     string
	stderr  *SyncBuffer
	started time.Time
	done    chan struct{} // closed once QEMU has exited; then err is its exit
	err     error
}

// machineArgs is the architecture-specific start of the command line.
func machineArgs(arch computev1alpha1.Architecture) (binary string, args []string) {
	switch arch {
	case computev1alpha1.ArchitectureAMD64:
		return "qemu-system-x86_64", []string{"-machine", "q35", "-accel", "tcg", "-m", "256", "-smp", "1"}
	case computev1alpha1.ArchitectureARM64:
		return "qemu-system-aarch64", []string{"-machine", "virt", "-cpu", "cortex-a57", "-accel", "tcg", "-m", "256", "-smp", "1"}
	}
	return "", nil
}

// boot starts QEMU for arch with the kernel of kernelArch and the initramfs of initrdArch
// (the same but for the wrong-architecture test), plus extra arguments (the config source).
// QEMU is killed by PID when the test ends, whatever happened.
func boot(t *testing.T, arch, initrdArch computev1alpha1.Architecture, extra ...string) *vm {
	t.Helper()
	dir := Dir(t)
	binary, args := machineArgs(arch)
	path, err := exec.LookPath(binary)
	if err != nil {
		t.Fatalf("%s is missing: run make deps", binary)
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, string(arch), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	// A short folder of its own: a unix socket's path must fit in 108 bytes.
	work, err := os.MkdirTemp("", "testos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	v := &vm{
		serial: filepath.Join(work, "serial.log"),
		qmp:    filepath.Join(work, "qmp.sock"),
		stderr: &SyncBuffer{},
		done:   make(chan struct{}),
	}
	args = append(args,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", filepath.Join(dir, string(arch), "kernel"),
		"-initrd", filepath.Join(dir, string(initrdArch), "initramfs"),
		"-append", strings.TrimSpace(string(cmdline)),
		"-serial", "file:"+v.serial,
		"-qmp", "unix:"+v.qmp+",server=on,wait=off",
		"-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
	)
	args = append(args, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	v.cmd = exec.CommandContext(ctx, path, args...)
	v.cmd.Stdout, v.cmd.Stderr = v.stderr, v.stderr
	t.Logf("%s %s", binary, strings.Join(args, " "))
	v.started = time.Now()
	if err := v.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", binary, err)
	}
	go func() {
		v.err = v.cmd.Wait()
		close(v.done)
	}()
	t.Cleanup(func() {
		select {
		case <-v.done:
		default:
			_ = v.cmd.Process.Kill()
			<-v.done
		}
		cancel()
	})
	return v
}

// waitForLine waits for a console line containing substr and returns it without its
// line ending, and how long after QEMU's start it was seen.
func (v *vm) waitForLine(t *testing.T, substr string, deadline time.Duration) (string, time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		if lines := v.lines(substr); len(lines) > 0 {
			return lines[0], time.Since(v.started)
		}
		select {
		case <-v.done:
			t.Fatalf("QEMU exited (%v) before printing %q; stderr: %s\nconsole:\n%s", v.err, substr, v.stderr, v.console())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("no %q on the console after %s; console:\n%s", substr, deadline, v.console())
		}
	}
}

// lines returns the console lines containing substr.
func (v *vm) lines(substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(v.console()))
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func (v *vm) console() string {
	b, _ := os.ReadFile(v.serial)
	return string(b)
}

// powerOff presses the power button over QMP and waits for QEMU to exit, returning how long
// that took.
func (v *vm) powerOff(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := qmp(v.qmp, "system_powerdown"); err != nil {
		t.Fatalf("QMP system_powerdown: %v", err)
	}
	select {
	case <-v.done:
	case <-time.After(powerOffDeadline):
		t.Fatalf("QEMU still runs %s after system_powerdown; console:\n%s", powerOffDeadline, v.console())
	}
	if v.err != nil {
		t.Fatalf("QEMU exited with %v after system_powerdown; stderr: %s", v.err, v.stderr)
	}
	return time.Since(start)
}

// qmp runs one command on a QMP socket: greeting, capabilities negotiation, the command.
func qmp(socket, command string) error {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	dec := json.NewDecoder(conn)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := dec.Decode(&greeting); err != nil || greeting.QMP == nil {
		return fmt.Errorf("no QMP greeting: %v", err)
	}
	for _, cmd := range []string{"qmp_capabilities", command} {
		if err := json.NewEncoder(conn).Encode(map[string]string{"execute": cmd}); err != nil {
			return err
		}
		for { // events may come before the answer
			var reply struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
			}
			if err := dec.Decode(&reply); err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			if reply.Error != nil {
				return fmt.Errorf("%s: %s", cmd, reply.Error.Desc)
			}
			if reply.Return != nil {
				break
			}
		}
	}
	return nil
}
