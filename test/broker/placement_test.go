package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

const arm64Guest = `
apiVersion: v1
kind: Secret
metadata: {name: arm64-user-data, namespace: tenant}
stringData:
  userData: |
    #cloud-config
    hostname: guest-arm64
    # anvil-marker=value-arm64
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: guest-arm64, namespace: tenant}
spec:
  machineClassRef: {name: e2e-vm}
  architecture: arm64
  image: %s
  userDataRef: {name: arm64-user-data}
`

// Only S2 runs arm64: R's scheduler picks its broker pool, S2's scheduler its QEMU pool,
// the guest boots with the region's first-boot config, and R shows what S2 sees.
func (f *fleet) arm64LandsOnS2(t *testing.T) {
	f.r.apply(t, fmt.Sprintf(arm64Guest, f.s2.testOS()))
	f.r.wait(t, 6*time.Minute, "Running", "get", "machine", "guest-arm64", "-n", tenant, "-o", "jsonpath={.status.state}")
	f.r.wait(t, time.Minute, "s2", "get", "machine", "guest-arm64", "-n", tenant, "-o", "jsonpath={.spec.machinePoolRef.name}")
	up := f.r.machine(t, "guest-arm64")
	down := f.s2.downstreamOf(t, string(up.UID))
	if len(down) != 1 {
		t.Fatalf("S2 has %d Machines for guest-arm64 (uid %s), want 1", len(down), up.UID)
	}
	d := down[0]
	if d.Spec.MachinePoolRef == nil || d.Spec.MachinePoolRef.Name != "dev-qemu-arm64" || d.Status.State != computev1alpha1.MachineStateRunning {
		t.Fatalf("S2's Machine %s: pool %v, state %s; want Running on dev-qemu-arm64", d.Name, d.Spec.MachinePoolRef, d.Status.State)
	}
	if n := len(f.s1.brokered(t, "s1")); n != 0 {
		t.Errorf("S1 has %d brokered Machines; the arm64 one went there too", n)
	}

	// What a user of the region sees is what the site sees: the address and the console.
	addresses := f.r.kubectl(t, "", "get", "machine", "guest-arm64", "-n", tenant, "-o", "jsonpath={.status.addresses}")
	if want := f.s2.kubectl(t, "", "get", "machine", d.Name, "-n", brokerNamespace, "-o", "jsonpath={.status.addresses}"); addresses == "" || addresses != want {
		t.Errorf("R shows addresses %q; S2's Machine has %q", addresses, want)
	}
	if !strings.Contains(addresses, "guest-arm64") {
		t.Errorf("R's addresses %q do not name the guest", addresses)
	}
	// The console: the region's console API, through the broker, reads the site's.
	f.r.wait(t, time.Minute, "True "+computev1alpha1.ReasonConsoleAvailable, "get", "machine", "guest-arm64", "-n", tenant, "-o",
		`jsonpath={.status.conditions[?(@.type=="`+computev1alpha1.ConditionConsoleAvailable+`")].status} {.status.conditions[?(@.type=="`+computev1alpha1.ConditionConsoleAvailable+`")].reason}`)
	waitConsole(t, f.r.kubeconfig, tenant, "guest-arm64", testos.ReadyLine(computev1alpha1.ArchitectureARM64, "guest-arm64", "value-arm64"))
	id := d.Status.MachineID
	if id == "" || len(devproc.QemuProcesses(id)) != 1 {
		t.Fatalf("want one QEMU process for S2's machine %q, found %v", id, devproc.QemuProcesses(id))
	}

	// Deleted in R, it is gone from S2 (the broker reports a machine gone only once its
	// downstream Machine is) and so is its VM (the qemu runtime's delete ends it first).
	f.r.kubectl(t, "", "delete", "machine", "guest-arm64", "-n", tenant, "--timeout", "3m")
	if left := f.s2.downstreamOf(t, string(up.UID)); len(left) != 0 {
		t.Errorf("guest-arm64 is deleted in R but S2 still has %s (state %s)", left[0].Name, left[0].Status.State)
	}
	if pids := devproc.QemuProcesses(id); len(pids) != 0 {
		t.Errorf("guest-arm64 is deleted in R but its QEMU processes %v still run", pids)
	}
}

const metalMachine = `
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: server-1, namespace: tenant}
spec:
  machineClassRef: {name: e2e-vm}
  architecture: amd64
  image: %s
  machinePoolSelector: {anvil.test/site: s2}
  tolerations: [{key: anvil.test/metal, operator: Exists, effect: NoSchedule}]
`

// S2 runs amd64 only on its bare-metal pool: a Machine asking for S2 and tolerating its
// servers' taint is deployed by Ironic onto one of S2's fake-hardware Hosts.
func (f *fleet) metalLandsOnS2(t *testing.T) {
	f.r.apply(t, fmt.Sprintf(metalMachine, f.s2.registry+"/anvil/metal-disk:latest"))
	f.r.wait(t, 5*time.Minute, "Running", "get", "machine", "server-1", "-n", tenant, "-o", "jsonpath={.status.state}")
	up := f.r.machine(t, "server-1")
	down := f.s2.downstreamOf(t, string(up.UID))
	if len(down) != 1 {
		t.Fatalf("S2 has %d Machines for server-1, want 1", len(down))
	}
	d := down[0]
	if d.Spec.MachinePoolRef == nil || d.Spec.MachinePoolRef.Name != "dev-metal" {
		t.Fatalf("S2's Machine %s is on %v, want dev-metal", d.Name, d.Spec.MachinePoolRef)
	}
	consumers := f.s2.kubectl(t, "", "get", "hosts", "-n", "anvil-metal", "-o",
		`jsonpath={range .items[*]}{.spec.consumerRef.namespace}/{.spec.consumerRef.name} {.status.provisioningState}{"\n"}{end}`)
	if !strings.Contains(consumers, brokerNamespace+"/"+d.Name+" Provisioned\n") {
		t.Fatalf("no Host of S2 is Provisioned for %s/%s:\n%s", brokerNamespace, d.Name, consumers)
	}
	f.r.kubectl(t, "", "delete", "machine", "server-1", "-n", tenant, "--timeout", "3m")
	if left := f.s2.downstreamOf(t, string(up.UID)); len(left) != 0 {
		t.Errorf("server-1 is deleted in R but S2 still has %s", left[0].Name)
	}
}
