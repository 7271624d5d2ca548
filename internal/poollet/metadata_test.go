package poollet_test

import (
	"maps"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// The Machine's spec.hostname, spec.metaData and spec.hardwareMetaData reach the runtime as
// the machine's hostname, first-boot metadata and hardware references (with no first-boot Secret at all); a Machine without a
// hostname gives its name. Changed metadata waits for the next reimage, like a changed
// first-boot Secret, and that reimage carries it.
func TestHostnameAndMetaDataReachTheRuntime(t *testing.T) {
	startControllers(t)
	p := newPool(t, "metadata", knownImages)
	want := map[string]string{"anvil-index": "3", "rack": "r1: b\nc"}
	m := newMachine(t, "metadata", "vm-meta", func(m *computev1alpha1.Machine) {
		m.Spec.Hostname = "workers-3"
		m.Spec.MetaData = want
		m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}
	})
	plain := newMachine(t, "metadata", "vm-plain", nil)
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	waitFor(t, plain, "ran", inState(computev1alpha1.MachineStateRunning))

	rms := p.runtimeMachines(m)
	if len(rms) != 1 {
		t.Fatalf("runtime machines %v, want one", rms)
	}
	fb := rms[0].GetSpec().GetFirstBoot()
	if got := rms[0].GetSpec().GetHostname(); got != "workers-3" {
		t.Errorf("runtime hostname %q, want spec.hostname workers-3", got)
	}
	if fb.GetFormat() != mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE || !maps.Equal(fb.GetMetaData(), want) {
		t.Errorf("runtime first boot %v, want format NONE with metadata %v", fb, want)
	}
	// The hardware reference goes as it is: the runtime resolves it (MRI rule F2).
	if hw := fb.GetHardwareMetaData(); len(hw) != 1 || hw[0].GetKey() != "mac" || hw[0].GetName() != "eth0" ||
		hw[0].GetField() != mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS {
		t.Errorf("runtime first boot's hardware references %v, want mac from eth0's NIC_MAC_ADDRESS", hw)
	}
	if rp := p.runtimeMachines(plain); len(rp) != 1 || rp[0].GetSpec().GetHostname() != "vm-plain" || rp[0].GetSpec().GetFirstBoot().GetMetaData() != nil {
		t.Errorf("runtime machines of a Machine without hostname or metadata: %v, want its name as hostname and no metadata", rp)
	}

	next := map[string]string{"anvil-index": "4"}
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.MetaData = next })
	waitFor(t, m, "said the new metadata waits", conditionIs(computev1alpha1.ConditionFirstBootUpToDate, computev1alpha1.ReasonAppliedAtNextReimage))
	if got := p.runtimeMachines(m)[0].GetSpec().GetFirstBoot().GetMetaData(); !maps.Equal(got, want) {
		t.Errorf("metadata of the running machine changed to %v before a reimage", got)
	}
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.Image = otherImage })
	waitFor(t, m, "was reimaged", func(m *computev1alpha1.Machine) bool {
		return inState(computev1alpha1.MachineStateRunning)(m) && conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimaged)(m)
	})
	if got := p.runtimeMachines(m)[0].GetSpec().GetFirstBoot().GetMetaData(); !maps.Equal(got, next) {
		t.Errorf("metadata after the reimage %v, want %v", got, next)
	}
}
