package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// qemuPool is one `anvil runtime qemu` and its `anvil poollet`, as processes.
type qemuPool struct {
	name, stateDir string
}

// startQemuPool starts the pool's processes; registry (anvil dev's, on loopback) is the
// one non-public registry they may read, with anvil dev's pools' read credential.
func startQemuPool(t *testing.T, kubeconfig, registry string, arch computev1alpha1.Architecture) qemuPool {
	credentials := devproc.PoolsCredentials(kubeconfig)
	t.Helper()
	p := qemuPool{name: "qemu-" + string(arch), stateDir: shortDir(t)}
	// VMs outlive their runtime by design; a test that stops early must not leave any.
	t.Cleanup(func() {
		devproc.KillQemu(p.stateDir)
	})
	socket := "unix://" + filepath.Join(t.TempDir(), "mri.sock")
	rt := devproc.Background(t, env.AnvilBin, "runtime", "qemu", "--pool", p.name, "--listen", socket,
		"--state-dir", p.stateDir, "--cache-dir", filepath.Join(t.TempDir(), "cache"), "--arch", string(arch), "--allow-registry", registry, "--registry-credentials", credentials)
	t.Cleanup(func() { devproc.StopProcess(rt) })
	poolletCmd := exec.Command(env.AnvilBin, "poollet", "--pool", p.name, "--runtime", socket, "--interval", "1s",
		"--labels", "compute.anvil.dev/runtime=qemu", "--allow-registry", registry, "--registry-credentials", credentials,
		"--console-address", "127.0.0.1:0")
	poolletCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	poollet := devproc.StartProcess(t, poolletCmd)
	t.Cleanup(func() { devproc.StopProcess(poollet) })
	return p
}

const vmObjects = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata:
  name: e2e-vm
capabilities:
  cpu: "1"
  memory: 512Mi
---
apiVersion: v1
kind: Secret
metadata:
  name: amd64-ignition
  namespace: default
stringData:
  ignition: '{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,guest-amd64"}},{"path":"/etc/anvil/marker","contents":{"source":"data:,anvil-marker=value-amd64"}}]}}'
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata:
  name: guest-amd64
  namespace: default
spec:
  machineClassRef: {name: e2e-vm}
  architecture: amd64
  image: IMAGE
  ignitionRef: {name: amd64-ignition}
---
apiVersion: v1
kind: Secret
metadata:
  name: arm64-user-data
  namespace: default
stringData:
  userData: |
    #cloud-config
    hostname: guest-arm64
    # anvil-marker=value-arm64
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata:
  name: guest-arm64
  namespace: default
spec:
  machineClassRef: {name: e2e-vm}
  architecture: arm64
  image: IMAGE
  userDataRef: {name: arm64-user-data}
`

// Two pools of real QEMU, one per architecture, and one multi-arch image: each guest
// boots its own architecture's entry with its own first-boot config; an image without an
// arm64 entry never reaches the arm64 pool; power and delete act on the real VM.
func TestQemuPoolsBootTheImageOfTheirArchitecture(t *testing.T) {
	state := t.TempDir()
	registryPort := devproc.FreePort(t)
	d := env.StartDev(t, "--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "",
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-pool=false", "--test-os", testos.Dir(t))
	// Cleanups run last registered first: the pools' processes stop before anvil dev, so
	// their watches do not hold up kube-apiserver's shutdown.
	t.Cleanup(func() { d.Stop(syscall.SIGTERM) })
	kubeconfig := filepath.Join(state, "kubeconfig")
	registry := "127.0.0.1:" + registryPort
	image := registry + "/anvil/testos:latest" // published by anvil dev from --test-os
	amd64Only := pushAMD64Only(t, registry, state)

	pools := map[computev1alpha1.Architecture]qemuPool{}
	for _, arch := range []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64} {
		pools[arch] = startQemuPool(t, kubeconfig, registry, arch)
		env.WaitKubectl(t, kubeconfig, "True", "get", "machinepool", pools[arch].name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	}
	env.Apply(t, kubeconfig, strings.ReplaceAll(vmObjects, "IMAGE", image))

	for _, g := range []struct {
		name string
		arch computev1alpha1.Architecture
	}{{"guest-amd64", computev1alpha1.ArchitectureAMD64}, {"guest-arm64", computev1alpha1.ArchitectureARM64}} {
		waitKubectlLong(t, kubeconfig, "Running", 5*time.Minute, "get", "machine", g.name, "-o", "jsonpath={.status.state}")
		env.WaitKubectl(t, kubeconfig, pools[g.arch].name, "get", "machine", g.name, "-o", "jsonpath={.spec.machinePoolRef.name}")
		marker := strings.TrimPrefix(g.name, "guest-")
		waitConsole(t, kubeconfig, g.name, testos.ReadyLine(g.arch, g.name, "value-"+marker), 1)
	}
	// The same console through the API, as a tenant reads it and types at it
	// (docs/console.md): the arm64 guest's log, and its serial terminal's echo.
	ready := testos.ReadyLine(computev1alpha1.ArchitectureARM64, "guest-arm64", "value-arm64")
	if log, err := env.Kubectl(t, kubeconfig, "", "get", "--raw",
		"/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/default/machines/guest-arm64/consolelog"); err != nil || !strings.Contains(log, ready) {
		t.Errorf("guest-arm64's console log through the API: %v, want its ready line %q in:\n%s", err, ready, log)
	}
	env.WaitKubectl(t, kubeconfig, "True/Available", "get", "machine", "guest-arm64", "-o",
		`jsonpath={.status.conditions[?(@.type=="ConsoleAvailable")].status}/{.status.conditions[?(@.type=="ConsoleAvailable")].reason}`)
	typing := env.StartConsole(t, kubeconfig, "default", "guest-arm64")
	typing.Await(t, "attached")
	typed := fmt.Sprintf("through-the-api-%d", time.Now().UnixNano())
	if _, err := io.WriteString(typing.Stdin, "echo "+typed+"\r"); err != nil {
		t.Fatal(err)
	}
	typing.Await(t, typed)
	typing.Stop()

	// The amd64-only image: the scheduler reads its index and picks the amd64 pool; asked
	// for arm64 it says no architecture fits; pinned to the arm64 pool, the runtime refuses.
	env.Apply(t, kubeconfig, fmt.Sprintf(`
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: only-amd64, namespace: default}
spec: {machineClassRef: {name: e2e-vm}, image: %[1]s, power: "Off"}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: only-amd64-as-arm64, namespace: default}
spec: {machineClassRef: {name: e2e-vm}, image: %[1]s, architecture: arm64, power: "Off"}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: only-amd64-forced, namespace: default}
spec: {machineClassRef: {name: e2e-vm}, image: %[1]s, machinePoolRef: {name: %[2]s}, power: "Off"}
`, amd64Only, pools[computev1alpha1.ArchitectureARM64].name))
	env.WaitKubectl(t, kubeconfig, pools[computev1alpha1.ArchitectureAMD64].name, "get", "machine", "only-amd64", "-o", "jsonpath={.spec.machinePoolRef.name}")
	waitKubectlContains(t, kubeconfig, "its image (amd64)", "get", "machine", "only-amd64-as-arm64", "-o",
		`jsonpath={.status.conditions[?(@.type=="Scheduled")].message}`)
	waitKubectlContains(t, kubeconfig, "RuntimeRefused", "get", "machine", "only-amd64-forced", "-o",
		`jsonpath={.status.conditions[?(@.type=="Scheduled")].reason}`)
	refusal, _ := env.Kubectl(t, kubeconfig, "", "get", "machine", "only-amd64-forced", "-o", `jsonpath={.status.conditions[?(@.type=="Scheduled")].message}`)
	if !strings.Contains(refusal, "arm64") {
		t.Errorf("the refusal of the forced Machine does not name the architecture: %q", refusal)
	}

	// Power: Off stops the guest's QEMU, On boots it again.
	id, _ := env.Kubectl(t, kubeconfig, "", "get", "machine", "guest-amd64", "-o", "jsonpath={.status.machineID}")
	if len(qemuProcesses(t, id)) != 1 {
		t.Fatalf("want one QEMU process for machine %s, found %v", id, qemuProcesses(t, id))
	}
	patchPower(t, kubeconfig, "guest-amd64", "Off")
	waitKubectlLong(t, kubeconfig, "Shutdown", 2*time.Minute, "get", "machine", "guest-amd64", "-o", "jsonpath={.status.state}")
	if pids := qemuProcesses(t, id); len(pids) != 0 {
		t.Errorf("machine %s is Shutdown but QEMU processes %v still run", id, pids)
	}
	patchPower(t, kubeconfig, "guest-amd64", "On")
	waitKubectlLong(t, kubeconfig, "Running", 2*time.Minute, "get", "machine", "guest-amd64", "-o", "jsonpath={.status.state}")
	waitConsole(t, kubeconfig, "guest-amd64", testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "guest-amd64", "value-amd64"), 2)

	// Reimage: a new spec.image boots on the same machine (id, pool), in place, and the
	// Machine says so; its status names the new image once it runs it.
	if out, err := env.Kubectl(t, kubeconfig, "", "patch", "machine", "guest-amd64", "--type", "merge", "-p", `{"spec":{"image":"`+amd64Only+`"}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	waitKubectlLong(t, kubeconfig, computev1alpha1.ReasonReimaged, 3*time.Minute, "get", "machine", "guest-amd64", "-o", `jsonpath={.status.conditions[?(@.type=="Reimaging")].reason}`)
	waitConsole(t, kubeconfig, "guest-amd64", testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "guest-amd64", "value-amd64"), 3)
	if got, _ := env.Kubectl(t, kubeconfig, "", "get", "machine", "guest-amd64", "-o", "jsonpath={.status.machineID} {.status.image.reference} {.status.state}"); got != id+" "+amd64Only+" Running" {
		t.Errorf("after the reimage: %q, want the same machine %s running %s", got, id, amd64Only)
	}
	if pids := qemuProcesses(t, id); len(pids) != 1 {
		t.Errorf("after the reimage machine %s has QEMU processes %v, want one", id, pids)
	}
	if events, _ := env.Kubectl(t, kubeconfig, "", "get", "events", "--field-selector", "involvedObject.name=guest-amd64", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(events, "Reimaging") || !strings.Contains(events, "Reimaged") {
		t.Errorf("events of the reimaged Machine: %q, want Reimaging and Reimaged", events)
	}

	// Delete: the Machine goes once the VM, its disks and its folder are gone.
	if out, err := env.Kubectl(t, kubeconfig, "", "delete", "machine", "guest-amd64", "--timeout", "3m"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	if pids := qemuProcesses(t, id); len(pids) != 0 {
		t.Errorf("deleted machine %s still has QEMU processes %v", id, pids)
	}
	if left := filesNaming(t, pools[computev1alpha1.ArchitectureAMD64].stateDir, id); len(left) != 0 {
		t.Errorf("deleted machine %s left files behind: %v", id, left)
	}
}

// shortDir is a fresh folder with a short path: QMP socket paths inside a runtime's state
// must stay under Linux's 108-byte limit, which t.TempDir's long names can exceed.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "aq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// pushAMD64Only publishes the test OS's amd64 entry alone, with the push credential anvil
// dev keeps in its state folder (its registry refuses anonymous writes).
func pushAMD64Only(t *testing.T, registry, state string) string {
	t.Helper()
	push := exec.Command(env.AnvilBin, "image", "push", registry+"/anvil/testos-amd64:1",
		"--from", "amd64="+filepath.Join(testos.Dir(t), "amd64"))
	push.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(state, "docker"))
	out, err := push.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("anvil image push: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func patchPower(t *testing.T, kubeconfig, machine, power string) {
	t.Helper()
	if out, err := env.Kubectl(t, kubeconfig, "", "patch", "machine", machine, "--type", "merge", "-p", `{"spec":{"power":"`+power+`"}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
}

// waitConsole waits until the console log holds line at least n times (once per boot).
func waitConsole(t *testing.T, kubeconfig, name, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	var got string
	var err error
	for time.Now().Before(deadline) {
		if got, err = env.ConsoleLog(t, kubeconfig, "default", name); err == nil && strings.Count(got, line) >= n {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the console of %s never showed %q %d times (last read: %v); it holds:\n%s", name, line, n, err, got)
}

// waitConsoleFile waits until the console log file at path (an emulated server's, as its
// BMC records it) holds line at least n times.
func waitConsoleFile(t *testing.T, path, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	var got []byte
	for time.Now().Before(deadline) {
		if got, _ = os.ReadFile(path); strings.Count(string(got), line) >= n {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("console %s never showed %q %d times; it holds:\n%s", path, line, n, got)
}

// qemuProcesses lists the QEMU processes whose command line holds id (a machine id, a
// state folder); an empty id is a test's mistake.
func qemuProcesses(t *testing.T, id string) []int {
	t.Helper()
	if id == "" {
		t.Fatal("no machine id")
	}
	return devproc.QemuProcesses(id)
}

// filesNaming lists the paths under dir whose name contains id.
func filesNaming(t *testing.T, dir, id string) []string {
	t.Helper()
	var found []string
	err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(path), id) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// waitKubectlLong is waitKubectl with its own limit, for guests booting under TCG.
func waitKubectlLong(t *testing.T, kubeconfig, want string, limit time.Duration, args ...string) {
	t.Helper()
	env.WaitKubectlFor(t, kubeconfig, limit, "be "+want, func(out string) bool { return out == want }, args...)
}

func waitKubectlContains(t *testing.T, kubeconfig, want string, args ...string) {
	t.Helper()
	env.WaitKubectlFor(t, kubeconfig, 2*time.Minute, "contain "+want, func(out string) bool { return strings.Contains(out, want) }, args...)
}
