package qemu

import (
	"maps"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// checkHardwareRefs refuses first-boot hardware references a VM cannot answer (MRI rule
// F2). nics are the machine's NICs with their MACs.
func checkHardwareRefs(refs []*mriv1alpha1.HardwareMetaData, nics map[string]string) error {
	_, err := resolveHardwareRefs(refs, nics)
	return err
}

// resolveHardwareRefs is the value of each reference: a NIC's MAC from nics. A disk serial
// is refused, since the runtime gives its disks none, and so is a NIC the machine lacks.
func resolveHardwareRefs(refs []*mriv1alpha1.HardwareMetaData, nics map[string]string) (map[string]string, error) {
	for _, r := range refs {
		if r.GetField() == mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER {
			return nil, mri.Invalidf("hardware key %q: a VM has no disk serial numbers (its disks are files this runtime makes, with no serial to report): "+
				"drop the key, or run the machine on a bare-metal pool", r.GetKey())
		}
	}
	values, err := mri.ResolveHardware(refs, mri.HardwareNames{NICs: nics})
	if err != nil {
		return nil, mri.Invalidf("%v: a VM's NICs are the spec's network_interfaces", err)
	}
	return values, nil
}

// specNICs are the spec's NICs by name, each with the MAC it gets: its own, or the one
// derived from the machine id and its name (which is not known before create, so any
// non-empty value stands in).
func specNICs(spec *mriv1alpha1.MachineSpec) map[string]string {
	nics := map[string]string{}
	for _, n := range spec.GetNetworkInterfaces() {
		nics[n.GetName()] = "derived"
		if n.GetMacAddress() != "" {
			nics[n.GetName()] = n.GetMacAddress()
		}
	}
	return nics
}

// nics are the record's attached NICs by name, with the MAC each was given.
func (rec *record) nics() map[string]string {
	nics := map[string]string{}
	for _, d := range rec.Devices {
		if d.Kind == kindNIC && !d.Detached {
			nics[d.Name] = d.MAC
		}
	}
	return nics
}

// firstBootMetaData is the metadata the guest reads: the spec's keys and the values of its
// hardware references, each NIC's MAC as this runtime gives it to QEMU.
func firstBootMetaData(fb *mriv1alpha1.FirstBootConfig, nics map[string]string) (map[string]string, error) {
	refs := fb.GetHardwareMetaData()
	if len(refs) == 0 {
		return fb.GetMetaData(), nil
	}
	values, err := resolveHardwareRefs(refs, nics)
	if err != nil {
		return nil, err
	}
	meta := maps.Clone(fb.GetMetaData())
	if meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, values)
	return meta, nil
}

// hasMetaData reports whether the first boot gives the guest metadata of its own.
func hasMetaData(fb *mriv1alpha1.FirstBootConfig) bool {
	return len(fb.GetMetaData()) > 0 || len(fb.GetHardwareMetaData()) > 0
}
