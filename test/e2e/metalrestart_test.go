package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// devKilledWithServers kills anvil dev (d, started with args on state) with SIGKILL while
// the sample Machines run on its emulated servers, as a crash would, and starts it again
// with the same flags: the servers run on, each its one QEMU with the same pid, adopted by
// the new emulator, and booted once; metal-1 stays Running, and powered off and on through
// the Machine it boots again; deleted, its server is wiped and no QEMU of it is left. It
// returns the anvil dev now running.
func devKilledWithServers(t *testing.T, d *devproc.Dev, state string, args []string) *devproc.Dev {
	t.Helper()
	began := time.Now()
	kubeconfig := filepath.Join(state, "kubeconfig")
	servers := dev.EmulatedServersDir(state)
	ready := map[string]string{
		"emulated-1":       testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "metal-1", "metal-1"),
		"emulated-arm64-1": testos.ReadyLine(computev1alpha1.ArchitectureARM64, "metal-arm64-1", "metal-arm64-1"),
	}
	boots := func(server string) int {
		raw, _ := os.ReadFile(filepath.Join(servers, server, "console.log"))
		return strings.Count(string(raw), ready[server])
	}
	pids := map[string][]int{}
	for server := range ready {
		pids[server] = bmcemu.ServerProcesses(servers, server)
		if len(pids[server]) != 1 || boots(server) != 1 {
			t.Fatalf("%s before the kill: QEMU %v, %d boots; want one of each", server, pids[server], boots(server))
		}
	}

	d.Kill(state)
	for server := range ready {
		if got := bmcemu.ServerProcesses(servers, server); !slices.Equal(got, pids[server]) {
			t.Fatalf("%s: QEMU %v once anvil dev was killed, want %v running on", server, got, pids[server])
		}
	}
	d = env.StartDev(t, args...)
	t.Logf("anvil dev killed and started again: up after %s", d.UpAfter)
	for _, machine := range []string{"metal-1", "metal-arm64-1"} {
		env.WaitKubectl(t, kubeconfig, "Running", "get", "machine", machine, "-n", "default", "-o", "jsonpath={.status.state}")
	}
	env.WaitKubectl(t, kubeconfig, "Provisioned/On", "get", "host", "emulated-1", "-n", "anvil-metal", "-o",
		"jsonpath={.status.provisioningState}/{.status.powerState}")
	time.Sleep(5 * time.Second) // a reboot would print the ready line again within seconds
	for server := range ready {
		if got := bmcemu.ServerProcesses(servers, server); !slices.Equal(got, pids[server]) || boots(server) != 1 {
			t.Fatalf("%s after anvil dev started again: QEMU %v, %d boots; want the same %v, booted once", server, got, boots(server), pids[server])
		}
	}

	// Power goes through the adopted server: off ends its QEMU, on boots it again.
	patchPower(t, kubeconfig, "metal-1", "Off")
	waitKubectlLong(t, kubeconfig, "Shutdown", 2*time.Minute, "get", "machine", "metal-1", "-n", "default", "-o", "jsonpath={.status.state}")
	if got := bmcemu.ServerProcesses(servers, "emulated-1"); len(got) != 0 {
		t.Fatalf("emulated-1: QEMU %v once metal-1 is Shutdown", got)
	}
	patchPower(t, kubeconfig, "metal-1", "On")
	waitKubectlLong(t, kubeconfig, "Running", 2*time.Minute, "get", "machine", "metal-1", "-n", "default", "-o", "jsonpath={.status.state}")
	waitConsoleFile(t, filepath.Join(servers, "emulated-1", "console.log"), ready["emulated-1"], 2)
	if got := bmcemu.ServerProcesses(servers, "emulated-1"); len(got) != 1 || got[0] == pids["emulated-1"][0] {
		t.Fatalf("emulated-1: QEMU %v powered on again, want one new one (the adopted one was %v)", got, pids["emulated-1"])
	}

	// Deleted, the server is wiped (the eraser runs on it and powers it off) and given back.
	if out, err := env.Kubectl(t, kubeconfig, "", "delete", "machine", "metal-1", "-n", "default", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	waitKubectlLong(t, kubeconfig, "Available/", 5*time.Minute, "get", "host", "emulated-1", "-n", "anvil-metal", "-o",
		"jsonpath={.status.provisioningState}/{.spec.consumerRef.name}")
	for deadline := time.Now().Add(time.Minute); len(bmcemu.ServerProcesses(servers, "emulated-1")) > 0; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("emulated-1: QEMU %v a minute after its Host was given back", bmcemu.ServerProcesses(servers, "emulated-1"))
		}
	}
	t.Logf("anvil dev's kill and restart with its servers checked in %s", time.Since(began).Round(time.Second))
	return d
}
