package qemu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Deleting a machine stops its QEMU and removes every file of it; the shared image cache
// stays.
func TestDeleteLeavesNothing(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, cfg)
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Volumes = append(spec.Volumes, &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 8 << 20}}})
	m := await(t, rt, create(t, rt, "uid-delete", spec).Metadata.Id, "ran", isRunning)
	pid, _ := strconv.Atoi(pidOf(t, m))
	socket := qmpSocketPath(cfg.StateDir, m.Metadata.Id)
	if !vm.Serves(pid, socket) {
		t.Fatalf("pid %d is not the machine's QEMU", pid)
	}
	remove(t, rt, m.Metadata.Id)
	await(t, rt, m.Metadata.Id, "went away", gone)

	if vm.Serves(pid, socket) {
		t.Errorf("QEMU %d still runs after the delete", pid)
	}
	if left := qemusUnder(cfg.StateDir); len(left) != 0 {
		t.Errorf("QEMU processes left: %v", left)
	}
	entries, err := os.ReadDir(filepath.Join(cfg.StateDir, machinesDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in the machines folder: %s", e.Name())
	}
	cached, _ := filepath.Glob(filepath.Join(filepath.Dir(cfg.StateDir), "cache", "*"))
	if len(cached) == 0 {
		t.Error("the delete emptied the shared image cache")
	}
}

// A restarted runtime adopts a running QEMU (the same process, not a new one) and still
// controls it.
func TestRestartAdoptsTheRunningQEMU(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := await(t, rt, create(t, rt, "uid-adopt", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)).Metadata.Id, "ran", isRunning)
	before := pidOf(t, m)
	rt.Close()

	rt = newRuntime(t, cfg)
	after := await(t, rt, m.Metadata.Id, "ran after the restart", isRunning)
	if got := pidOf(t, after); got != before {
		t.Fatalf("QEMU pid %s after the restart, was %s: adopt, never start a second", got, before)
	}
	if n := len(qemusUnder(cfg.StateDir)); n != 1 {
		t.Fatalf("%d QEMU processes for one machine", n)
	}
	power(t, rt, m.Metadata.Id, mriv1alpha1.Power_POWER_OFF)
	await(t, rt, m.Metadata.Id, "shut down through the adopted QMP", isShutdown)
	if left := qemusUnder(cfg.StateDir); len(left) != 0 {
		t.Fatalf("Shutdown reported while QEMU %v runs", left)
	}
}

// What a crash leaves in the middle of a create or a delete is finished or undone when
// the runtime starts again (CONTRACT.md R2).
func TestRestartFinishesInterruptedCreatesAndDeletes(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)

	// A delete that got as far as its record, with QEMU still running.
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deleting := await(t, rt, create(t, rt, "uid-deleting", spec).Metadata.Id, "ran", isRunning)
	deletingPID, _ := strconv.Atoi(pidOf(t, deleting))
	rt.Close()
	rewriteRecord(t, MachineDir(cfg.StateDir, deleting.Metadata.Id), func(r *record) { r.Phase = phaseDeleting })

	root := filepath.Join(cfg.StateDir, machinesDir)
	// A create that crashed before its folder was renamed into place.
	unborn := newRecord("qemu-0000000000a1", &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: "uid-unborn"}}, Spec: spec})
	writeRecordTo(t, filepath.Join(root, newPrefix+"qemu-0000000000a1"), unborn)
	// A create that crashed right after writing its record: nothing else exists yet.
	halfway := newRecord("qemu-0000000000b2", &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: "uid-halfway"}}, Spec: spec})
	writeRecordTo(t, filepath.Join(root, "qemu-0000000000b2"), halfway)
	// A delete that crashed while removing the folder.
	doomed := filepath.Join(root, deletedPrefix+"qemu-0000000000c3", disksDir)
	if err := os.MkdirAll(doomed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(doomed, "vol0.qcow2"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	rt = newRuntime(t, cfg)
	await(t, rt, deleting.Metadata.Id, "finished its delete", gone)
	if vm.Serves(deletingPID, qmpSocketPath(cfg.StateDir, deleting.Metadata.Id)) {
		t.Error("the QEMU of the deleted machine still runs")
	}
	await(t, rt, "qemu-0000000000b2", "finished its create and ran", isRunning)
	if get(t, rt, "qemu-0000000000a1") != nil {
		t.Error("a machine whose create never finished its folder is listed")
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.Name() != "qemu-0000000000b2" {
			t.Errorf("left in the machines folder: %s", e.Name())
		}
	}
}

func writeRecordTo(t *testing.T, dir string, rec *record) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(dir, raw); err != nil {
		t.Fatal(err)
	}
}

func rewriteRecord(t *testing.T, dir string, change func(*record)) {
	t.Helper()
	rec, err := readRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	change(rec)
	writeRecordTo(t, dir, rec)
}

// A QEMU that ends without being asked (killed, crashed) while power is On is started
// again.
func TestKilledQEMUIsStartedAgain(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, cfg)
	m := await(t, rt, create(t, rt, "uid-killed", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)).Metadata.Id, "ran", isRunning)
	pid, _ := strconv.Atoi(pidOf(t, m))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m = await(t, rt, m.Metadata.Id, "ran again in a new QEMU", func(m *mriv1alpha1.Machine) bool {
		if !isRunning(m) {
			return false
		}
		now, _ := strconv.Atoi(pidOf(t, m))
		return now != pid && vm.Serves(now, qmpSocketPath(cfg.StateDir, m.Metadata.Id))
	})
	if vm.Serves(pid, qmpSocketPath(cfg.StateDir, m.Metadata.Id)) {
		t.Fatal("the killed QEMU still serves")
	}
}
