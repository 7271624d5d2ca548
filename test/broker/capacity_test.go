package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

const fillMachine = `
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: %s, namespace: tenant, labels: {batch: fill}}
spec:
  machineClassRef: {name: fill}
  architecture: amd64
  image: %s
`

// S1's fake pool holds exactly two fill Machines (and no other pool of either site holds
// one): R places two there; a third stays Pending because the broker's pool reports no
// memory left, and nothing is made downstream for it. Pinned to the pool, the broker
// itself refuses it (NO_CAPACITY).
func (f *fleet) fullSiteTakesNoMore(t *testing.T) {
	for _, name := range []string{"fill-1", "fill-2"} {
		f.r.apply(t, fmt.Sprintf(fillMachine, name, f.s1.testOS()))
	}
	for _, name := range []string{"fill-1", "fill-2"} {
		f.r.wait(t, 2*time.Minute, "Running s1", "get", "machine", name, "-n", tenant, "-o", "jsonpath={.status.state} {.spec.machinePoolRef.name}")
		down := f.s1.downstreamOf(t, string(f.r.machine(t, name).UID))
		if len(down) != 1 || down[0].Spec.MachinePoolRef == nil || down[0].Spec.MachinePoolRef.Name != "s1-fake" {
			t.Fatalf("%s in S1: %d Machines (%v), want one on s1-fake", name, len(down), down)
		}
	}
	f.r.apply(t, fmt.Sprintf(fillMachine, "fill-3", f.s1.testOS()))
	f.r.apply(t, fmt.Sprintf(fillMachine, "fill-pinned", f.s1.testOS())+"  machinePoolRef: {name: s1}\n")

	var m *computev1alpha1.Machine
	eventually(t, 2*time.Minute, "fill-3 unschedulable for want of memory", func() (bool, string) {
		m = f.r.machine(t, "fill-3")
		c := condition(m, computev1alpha1.ConditionScheduled)
		return strings.HasPrefix(c, "Scheduled=False "+computev1alpha1.ReasonUnschedulable+": ") && strings.Contains(c, "insufficient memory"), c
	})
	if m.Spec.MachinePoolRef != nil || m.Status.State != computev1alpha1.MachineStatePending {
		t.Errorf("fill-3 is on pool %v in state %q; want Pending, on no pool", m.Spec.MachinePoolRef, m.Status.State)
	}
	eventually(t, 2*time.Minute, "fill-pinned refused by the broker", func() (bool, string) {
		m = f.r.machine(t, "fill-pinned")
		c := condition(m, computev1alpha1.ConditionScheduled)
		return strings.HasPrefix(c, "Scheduled=False "+computev1alpha1.ReasonRuntimeRefused+": ") && strings.Contains(c, "memory"), c
	})
	for _, name := range []string{"fill-3", "fill-pinned"} {
		if down := f.s1.downstreamOf(t, string(f.r.machine(t, name).UID)); len(down) != 0 {
			t.Errorf("S1 has a Machine (%s) for %s, which does not fit", down[0].Name, name)
		}
	}
	if n := len(f.s1.brokered(t, "s1")); n != 2 {
		t.Errorf("S1 holds %d brokered Machines, want the two fill Machines", n)
	}

	f.r.kubectl(t, "", "delete", "machines", "-n", tenant, "-l", "batch=fill", "--timeout", "2m")
	if left := f.s1.brokered(t, "s1"); len(left) != 0 {
		t.Errorf("the fill Machines are deleted in R but S1 still has %d", len(left))
	}
}
