package qemu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/test/testos"
)

// A hung guest is what remediation is for: a QEMU that is frozen (SIGSTOP, so it answers no
// QMP) is still rebooted — the runtime ends that process for good once it stays unreachable
// and starts the machine again on the same disks — and powered off.
func TestFrozenQEMUIsRebootedAndPoweredOff(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, cfg)
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Hostname = "vm-frozen"
	ready := testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-frozen", "conformance")
	m := await(t, rt, create(t, rt, "uid-frozen", spec).Metadata.Id, "ran", isRunning)
	id := m.Metadata.Id
	awaitConsole(t, m.Status.Console, ready)
	disk := rootDisk(t, cfg.StateDir, id)

	pid := freezeQEMU(t, m)
	start := time.Now()
	if _, err := rt.RebootMachine(context.Background(), &mriv1alpha1.RebootMachineRequest{Id: id, Token: "t1"}); err != nil {
		t.Fatal(err)
	}
	m = awaitWithin(t, rt, id, "rebooted in a new QEMU", frozenPatience+bootTimeout, func(m *mriv1alpha1.Machine) bool {
		if !isRunning(m) || m.Status.RebootToken != "t1" {
			return false
		}
		// The pid file goes while one QEMU exits and the next starts.
		raw, err := os.ReadFile(filepath.Join(MachineDir(cfg.StateDir, id), pidFile))
		now, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && now != pid && now != 0
	})
	awaitReaped(t, pid)
	awaitConsoleCount(t, m.Status.Console, ready, 2)
	t.Logf("a frozen QEMU rebooted in %s", time.Since(start).Round(time.Millisecond))
	if again := rootDisk(t, cfg.StateDir, id); !os.SameFile(disk, again) {
		t.Errorf("the reboot made a new root disk")
	}

	pid = freezeQEMU(t, m)
	start = time.Now()
	power(t, rt, id, mriv1alpha1.Power_POWER_OFF)
	awaitWithin(t, rt, id, "shut down", frozenPatience+bootTimeout, isShutdown)
	awaitReaped(t, pid)
	t.Logf("a frozen QEMU powered off in %s", time.Since(start).Round(time.Millisecond))
}

// frozenPatience bounds how long the runtime may take to give up on a QEMU that answers
// no QMP: a command's timeout, then unreachablePatience, then the signals; a boot follows.
const frozenPatience = qmpTimeout + unreachablePatience + 30*time.Second

// freezeQEMU stops a machine's QEMU (SIGSTOP); the test's cleanup continues it if it is
// still there.
func freezeQEMU(t *testing.T, m *mriv1alpha1.Machine) int {
	t.Helper()
	pid, err := strconv.Atoi(pidOf(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	return pid
}

// awaitReaped waits until pid has no /proc entry: ended and reaped, neither stopped nor a
// zombie.
func awaitReaped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU %d is still there: %q", pid, stat)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rootDisk is the file of a machine's one disk.
func rootDisk(t *testing.T, stateDir, id string) os.FileInfo {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(MachineDir(stateDir, id), disksDir, "*.qcow2"))
	if err != nil || len(files) != 1 {
		t.Fatalf("disks of %s: %v (%v)", id, files, err)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
