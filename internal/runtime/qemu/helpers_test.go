package qemu

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// bootTimeout is generous: TCG guests on a loaded 2-core machine.
const bootTimeout = 120 * time.Second

func newRuntime(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

func create(t *testing.T, rt *Runtime, uid string, spec *mriv1alpha1.MachineSpec) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid}}, Spec: spec}})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	return resp.Machine
}

func get(t *testing.T, rt *Runtime, id string) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := rt.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Machines) == 0 {
		return nil
	}
	return resp.Machines[0]
}

func await(t *testing.T, rt *Runtime, id, what string, cond func(*mriv1alpha1.Machine) bool) *mriv1alpha1.Machine {
	t.Helper()
	return awaitWithin(t, rt, id, what, bootTimeout, cond)
}

func awaitWithin(t *testing.T, rt *Runtime, id, what string, timeout time.Duration, cond func(*mriv1alpha1.Machine) bool) *mriv1alpha1.Machine {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var m *mriv1alpha1.Machine
	for time.Now().Before(deadline) {
		if m = get(t, rt, id); cond(m) {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("machine %s never %s within %s; last seen %v", id, what, timeout, m)
	return nil
}

func settledIn(s mriv1alpha1.MachineState) func(*mriv1alpha1.Machine) bool {
	return func(m *mriv1alpha1.Machine) bool {
		return m != nil && m.Status.ObservedGeneration == m.Metadata.Generation && m.Status.State == s
	}
}

var (
	isRunning  = settledIn(mriv1alpha1.MachineState_MACHINE_STATE_RUNNING)
	isShutdown = settledIn(mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN)
)

func gone(m *mriv1alpha1.Machine) bool { return m == nil }

func power(t *testing.T, rt *Runtime, id string, p mriv1alpha1.Power) {
	t.Helper()
	if _, err := rt.UpdateMachinePower(context.Background(), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: p}); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	if _, err := rt.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
}

// awaitConsole waits until the console log holds line.
func awaitConsole(t *testing.T, path, line string) {
	t.Helper()
	awaitConsoleCount(t, path, line, 1)
}

// awaitConsoleCount waits until the console log holds line n times.
func awaitConsoleCount(t *testing.T, path, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(bootTimeout)
	var raw []byte
	for time.Now().Before(deadline) {
		raw, _ = os.ReadFile(path)
		if strings.Count(string(raw), line) >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("console %s never showed %q %d times within %s; it holds:\n%s", path, line, n, bootTimeout, raw)
}

func pidOf(t *testing.T, m *mriv1alpha1.Machine) string {
	t.Helper()
	raw, err := os.ReadFile(MachineDir(stateOf(m), m.Metadata.Id) + "/" + pidFile)
	if err != nil {
		t.Fatalf("pid file of %s: %v", m.Metadata.Id, err)
	}
	return strings.TrimSpace(string(raw))
}

// stateOf is the state directory of a machine, from its console path.
func stateOf(m *mriv1alpha1.Machine) string {
	dir := strings.TrimSuffix(m.Status.Console, "/"+ConsoleLogFile)
	return strings.TrimSuffix(dir, "/"+machinesDir+"/"+m.Metadata.Id)
}
