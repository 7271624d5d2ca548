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
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

const siteB = `
apiVersion: v1
kind: Namespace
metadata: {name: site-b}
---
apiVersion: metal.anvil.dev/v1alpha1
kind: HostPolicy
metadata: {name: default-ns, namespace: site-b}
spec:
  namespaces: [default]
---
apiVersion: metal.anvil.dev/v1alpha1
kind: Host
metadata: {name: b-1, namespace: site-b}
spec:
  bmc: {address: "fake://b-1?cpus=16&memory_mb=65536&local_gb=500"}
  bootMACAddress: "52:54:00:bb:00:01"
  architecture: amd64
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: on-site-b, namespace: default}
spec:
  machineClassRef: {name: medium}
  image: IMAGE
  machinePoolSelector: {compute.anvil.dev/runtime: metal-b}
`

// The demo's bare-metal pool deploys the sample Machines onto emulated servers (amd64
// BIOS, arm64 UEFI) through real Ironic and the Redfish BMC emulator, and each server's
// console shows its Machine's marker; and `anvil runtime metal` with `anvil poollet`, as a site would run them,
// provisions a Machine onto its own (fake-hardware) Host and gives the Host back when it
// is deleted. Then anvil dev, killed with SIGKILL and started again with the same flags,
// finds its servers running their Machines (devKilledWithServers).
func TestBareMetalPools(t *testing.T) {
	state := t.TempDir()
	// Servers outlive anvil dev, as VMs do: end them once it has stopped.
	t.Cleanup(func() {
		if err := bmcemu.PowerOffAll(dev.EmulatedServersDir(state)); err != nil {
			t.Errorf("ending the emulated servers: %v", err)
		}
	})
	registryPort := devproc.FreePort(t)
	args := []string{"--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "",
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", registryPort, "--qemu-pools=false", "--metal-image-port", devproc.FreePort(t),
		"--emulated-servers", "1", "--emulated-arm64-servers", "1", "--bmc-port", devproc.FreePort(t),
		"--test-os", testos.Dir(t), "--apply", env.Samples(t, "config/samples", registryPort)}
	d := env.StartDev(t, args...)
	kubeconfig := filepath.Join(state, "kubeconfig")

	waitKubectlLong(t, kubeconfig, "Running", 5*time.Minute, "get", "machine", "metal-1", "-n", "default", "-o", "jsonpath={.status.state}")
	env.WaitKubectl(t, kubeconfig, "dev-metal", "get", "machine", "metal-1", "-n", "default", "-o", "jsonpath={.spec.machinePoolRef.name}")
	env.WaitKubectl(t, kubeconfig, "Provisioned", "get", "host", "emulated-1", "-n", "anvil-metal", "-o",
		`jsonpath={.status.provisioningState}`)
	env.WaitKubectl(t, kubeconfig, "metal-1", "get", "host", "emulated-1", "-n", "anvil-metal", "-o", `jsonpath={.spec.consumerRef.name}`)
	env.WaitKubectl(t, kubeconfig, "2", "get", "hardwaredata", "metal-1", "-n", "default", "-o", "jsonpath={.spec.cpu.count}")
	waitConsoleFile(t, filepath.Join(state, "pools", "dev-metal", "servers", "emulated-1", "console.log"), "marker=metal-1", 1)
	// Its server's serial console through the API (docs/console.md): the metal runtime
	// holds the session the emulated BMC serves (since the server was provisioned, so the
	// guest's boot is in the log), and a tenant types there once the guest is up.
	env.WaitKubectl(t, kubeconfig, "True/Available", "get", "machine", "metal-1", "-n", "default", "-o",
		`jsonpath={.status.conditions[?(@.type=="ConsoleAvailable")].status}/{.status.conditions[?(@.type=="ConsoleAvailable")].reason}`)
	metalLog := "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/default/machines/metal-1/consolelog"
	waitKubectlContains(t, kubeconfig, "marker=metal-1", "get", "--raw", metalLog)
	typing := env.StartConsole(t, kubeconfig, "default", "metal-1")
	typing.Await(t, "attached")
	typed := fmt.Sprintf("typed-at-a-server-%d", time.Now().UnixNano())
	if _, err := io.WriteString(typing.Stdin, typed+"\r"); err != nil {
		t.Fatal(err)
	}
	typing.Await(t, typed)
	typing.Stop()
	waitKubectlContains(t, kubeconfig, typed, "get", "--raw", metalLog)
	// The arm64 sample boots UEFI on the arm64 emulated server, from an ISO Ironic built
	// around the ESP anvil dev found in --bin-dir.
	waitKubectlLong(t, kubeconfig, "Running", 5*time.Minute, "get", "machine", "metal-arm64-1", "-n", "default", "-o", "jsonpath={.status.state}")
	env.WaitKubectl(t, kubeconfig, "metal-arm64-1", "get", "host", "emulated-arm64-1", "-n", "anvil-metal", "-o", `jsonpath={.spec.consumerRef.name}`)
	waitConsoleFile(t, filepath.Join(state, "pools", "dev-metal", "servers", "emulated-arm64-1", "console.log"),
		testos.ReadyLine(computev1alpha1.ArchitectureARM64, "metal-arm64-1", "metal-arm64-1"), 1)

	// A second site, run as its own processes.
	image := "127.0.0.1:" + registryPort + "/anvil/metal-disk:latest"
	socket := "unix://" + filepath.Join(t.TempDir(), "mri.sock")
	rtCmd := exec.Command(env.AnvilBin, "runtime", "metal", "--pool", "metal-b", "--namespace", "site-b", "--listen", socket,
		"--state-dir", shortDir(t), "--ironic-port", devproc.FreePort(t), "--image-listen", "127.0.0.1:"+devproc.FreePort(t),
		"--allow-registry", "127.0.0.1:"+registryPort, "--registry-credentials", devproc.PoolsCredentials(kubeconfig), "--wipe", "eraser", "--eraser", filepath.Join(env.BinDir, "eraser"))
	rtCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	env.Apply(t, kubeconfig, strings.ReplaceAll(siteB, "IMAGE", image))
	rt := devproc.StartProcess(t, rtCmd)
	t.Cleanup(func() { devproc.StopProcess(rt) })
	poolletCmd := exec.Command(env.AnvilBin, "poollet", "--pool", "metal-b", "--runtime", socket, "--interval", "1s",
		"--labels", "compute.anvil.dev/runtime=metal-b", "--allow-registry", "127.0.0.1:"+registryPort, "--registry-credentials", devproc.PoolsCredentials(kubeconfig))
	poolletCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	poollet := devproc.StartProcess(t, poolletCmd)
	t.Cleanup(func() { devproc.StopProcess(poollet) })

	waitKubectlLong(t, kubeconfig, "Running", 3*time.Minute, "get", "machine", "on-site-b", "-n", "default", "-o", "jsonpath={.status.state}")
	env.WaitKubectl(t, kubeconfig, "on-site-b", "get", "host", "b-1", "-n", "site-b", "-o", "jsonpath={.spec.consumerRef.name}")
	if _, err := env.Kubectl(t, kubeconfig, "", "delete", "machine", "on-site-b", "-n", "default", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	waitKubectlLong(t, kubeconfig, "Available/", 2*time.Minute, "get", "host", "b-1", "-n", "site-b", "-o",
		"jsonpath={.status.provisioningState}/{.spec.consumerRef.name}")
	devproc.StopProcess(poollet)
	devproc.StopProcess(rt)

	d = devKilledWithServers(t, d, state, args)
	d.Stop(syscall.SIGTERM)
}
