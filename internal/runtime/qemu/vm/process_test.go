package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func needQEMU(t *testing.T, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed: run make deps", p)
		}
	}
}

// A zero-filled "kernel" is enough for QEMU to start and serve QMP.
func launchBlank(t *testing.T, arch computev1alpha1.Architecture) (Spec, *Process) {
	t.Helper()
	program, err := Binary(arch)
	if err != nil {
		t.Fatal(err)
	}
	needQEMU(t, program)
	dir := t.TempDir()
	kernel := filepath.Join(dir, "kernel")
	if err := os.WriteFile(kernel, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Spec{
		Name: "blank", Architecture: arch, Accel: AccelTCG, CPUs: 1, MemoryMiB: 64, Kernel: kernel, RootPorts: 2,
		NICs:      []NIC{{ID: "nic0", MAC: "52:54:00:12:34:56", Port: 0}},
		QMPSocket: filepath.Join(dir, "qmp.sock"), ConsoleLog: filepath.Join(dir, "console.log"), ConsoleSocket: filepath.Join(dir, "console.sock"), PIDFile: filepath.Join(dir, "qemu.pid"),
	}
	args, err := Args(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Launch(program, args, filepath.Join(dir, "qemu.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(s.QMPSocket, time.Second) })
	return s, p
}

func TestLaunchFindKill(t *testing.T) {
	for _, arch := range Architectures() {
		s, p := launchBlank(t, arch)
		var found *Process
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			if found, ok = Find(s.PIDFile, s.QMPSocket); ok {
				break
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(filepath.Dir(s.PIDFile), "qemu.log"))
				t.Fatalf("%s: QEMU %d not found; its log:\n%s", arch, p.PID, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if found.PID != p.PID {
			t.Fatalf("%s: found pid %d, launched %d", arch, found.PID, p.PID)
		}
		if Serves(p.PID, s.QMPSocket+"x") || Serves(os.Getpid(), s.QMPSocket) {
			t.Fatalf("%s: Serves matched the wrong socket or process", arch)
		}
		if err := found.Kill(s.QMPSocket, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Exited():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: QEMU %d still running after Kill", arch, p.PID)
		}
		if _, ok := Find(s.PIDFile, s.QMPSocket); ok {
			t.Fatalf("%s: Find still finds the killed QEMU", arch)
		}
	}
}

func TestLaunchReportsQEMUErrorsInItsLog(t *testing.T) {
	needQEMU(t, "qemu-system-x86_64")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "qemu.log")
	p, err := Launch("qemu-system-x86_64", []string{"-nodefaults", "-display", "none", "-kernel", filepath.Join(dir, "missing")}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("QEMU without a kernel file kept running")
	}
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), "missing") {
		t.Fatalf("log does not say what failed:\n%s", log)
	}
}

func TestDisks(t *testing.T) {
	needQEMU(t, "qemu-img")
	ctx := context.Background()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o400); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(base)
	overlay := filepath.Join(dir, "root.qcow2")
	if err := CreateOverlay(ctx, overlay, base, FormatRaw, 8<<20); err != nil {
		t.Fatal(err)
	}
	if size, err := VirtualSize(ctx, overlay, FormatQCOW2); err != nil || size != 8<<20 {
		t.Fatalf("overlay virtual size %d %v, want 8 MiB", size, err)
	}
	small := filepath.Join(dir, "small.qcow2")
	if err := CreateOverlay(ctx, small, base, FormatRaw, 0); err != nil {
		t.Fatal(err)
	}
	if size, err := VirtualSize(ctx, small, FormatQCOW2); err != nil || size != 1<<20 {
		t.Fatalf("overlay with size 0: %d %v, want the backing size", size, err)
	}
	after, _ := os.Stat(base)
	if after.ModTime() != before.ModTime() || after.Size() != before.Size() {
		t.Error("creating overlays changed the backing file")
	}
	empty := filepath.Join(dir, "data.qcow2")
	if err := CreateEmpty(ctx, empty, 3<<20); err != nil {
		t.Fatal(err)
	}
	if size, err := VirtualSize(ctx, empty, FormatQCOW2); err != nil || size != 3<<20 {
		t.Fatalf("empty disk size %d %v", size, err)
	}
	if err := CreateEmpty(ctx, empty, 0); err == nil {
		t.Error("an empty disk of size 0 was accepted")
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// A stopped QEMU (SIGSTOP, as a hung machine) ends on SIGTERM at once, rather than after
// the whole grace on SIGKILL.
func TestKillEndsAStoppedQEMUAtOnce(t *testing.T) {
	s, p := launchBlank(t, computev1alpha1.ArchitectureAMD64)
	// Up to its main loop, with its signal handlers: before them, SIGTERM's default action
	// kills even a stopped process.
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("unix", s.QMPSocket)
		if err == nil {
			greeting, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.Contains(greeting, "QMP") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU %d never greeted on %s", p.PID, s.QMPSocket)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Stopped for real: a SIGTERM sent before the stop takes effect is taken first.
	for !stopped(p.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("QEMU %d never stopped", p.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	const grace = 20 * time.Second
	start := time.Now()
	if err := p.Kill(s.QMPSocket, grace); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	log, _ := os.ReadFile(filepath.Join(filepath.Dir(s.PIDFile), "qemu.log"))
	if took >= grace/2 {
		t.Fatalf("a stopped QEMU took %s to end (grace %s); its log:\n%s", took.Round(time.Millisecond), grace, log)
	}
}

// stopped reports whether /proc shows pid stopped by a signal (state T).
func stopped(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	return err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] == 'T'
}

func TestProcState(t *testing.T) {
	for stat, want := range map[string]byte{
		"1234 (qemu-system-x86) S 1 1234 1234 0 -1":   'S',
		"1234 (a) b) (c) Z 1 1234 1234 0 -1":          'Z',
		"1234 (qemu-system-aarch64) R 1 2 3":          'R',
		"7 (kworker/0:1-events) I 2 0 0 0 -1 6972000": 'I',
	} {
		if got, ok := procState(stat); !ok || got != want {
			t.Errorf("procState(%q) = %q %v, want %q", stat, got, ok, want)
		}
	}
	for _, bad := range []string{"", "1234 (qemu", "1234 (qemu)", "1234 (qemu) "} {
		if _, ok := procState(bad); ok {
			t.Errorf("procState(%q) read a state", bad)
		}
	}
}

// TestExitingIsFalseForLiveAndGone: a running process (this test) has a command line; a
// pid that does not exist is not exiting.
func TestExitingIsFalseForLiveAndGone(t *testing.T) {
	if exiting(os.Getpid()) {
		t.Error("this test's own process reads as exiting")
	}
	if exiting(1 << 30) {
		t.Error("a pid that does not exist reads as exiting")
	}
}
