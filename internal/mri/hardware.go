package mri

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// HardwareMetaDataToMRI is a Machine's spec.hardwareMetaData as the MRI carries it. A
// field the MRI does not know stays HARDWARE_FIELD_UNSPECIFIED, which ValidateFirstBoot
// refuses: an unknown field never reads as some other.
func HardwareMetaDataToMRI(refs []computev1alpha1.HardwareMetaData) []*mriv1alpha1.HardwareMetaData {
	if len(refs) == 0 {
		return nil
	}
	out := make([]*mriv1alpha1.HardwareMetaData, 0, len(refs))
	for _, r := range refs {
		f := mriv1alpha1.HardwareField_HARDWARE_FIELD_UNSPECIFIED
		switch r.Field {
		case computev1alpha1.HardwareNICMACAddress:
			f = mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS
		case computev1alpha1.HardwareDiskSerialNumber:
			f = mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER
		}
		out = append(out, &mriv1alpha1.HardwareMetaData{Key: r.Key, Field: f, Name: r.Name})
	}
	return out
}

// ValidateFirstBootMetaData is the contract's check of a first boot's metadata (F1, F2):
// meta_data holds to ValidateMetaData with the hardware references' keys counted in, and
// each reference has a key no other key has, a field the MRI defines and a name. The
// Machine's CRD says the same of spec.metaData and spec.hardwareMetaData.
func ValidateFirstBootMetaData(md map[string]string, refs []*mriv1alpha1.HardwareMetaData) error {
	all := maps.Clone(md)
	if all == nil {
		all = map[string]string{}
	}
	for _, r := range refs {
		if _, taken := all[r.GetKey()]; taken {
			return fmt.Errorf("hardware key %q is given twice (in meta_data or another hardware reference): give each key one source", r.GetKey())
		}
		all[r.GetKey()] = ""
		if err := checkEnum("hardware key "+strconv.Quote(r.GetKey())+": field", r.GetField(), mriv1alpha1.HardwareField_name,
			"NIC_MAC_ADDRESS or DISK_SERIAL_NUMBER"); err != nil {
			return err
		}
		if r.GetName() == "" {
			return fmt.Errorf("hardware key %q: name is empty: name the NIC or the disk", r.GetKey())
		}
	}
	return ValidateMetaData(all)
}

// HardwareNames are a machine's NICs or disks by name, with the value a reference to each
// reads (its MAC or serial; empty when it has none), as a runtime knows them.
type HardwareNames struct {
	NICs, Disks map[string]string
}

// ResolveHardware gives each reference its value from hw, the hardware of the machine.
// missing names the first reference hw cannot answer and what hw has instead, in words a
// tenant can act on ("no NIC "eno1" with a MAC address (it has "eth0", "eth1")"); a
// runtime refuses the machine with it, or tries other hardware.
func ResolveHardware(refs []*mriv1alpha1.HardwareMetaData, hw HardwareNames) (values map[string]string, missing error) {
	values = make(map[string]string, len(refs))
	for _, r := range refs {
		var have map[string]string
		var what string
		switch r.GetField() {
		case mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS:
			have, what = hw.NICs, "NIC %q with a MAC address"
		case mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER:
			have, what = hw.Disks, "disk %q with a serial number"
		default:
			return nil, fmt.Errorf("hardware key %q: field %v is not one this runtime reads", r.GetKey(), r.GetField())
		}
		v := have[r.GetName()]
		if v == "" {
			return nil, fmt.Errorf("hardware key %q: no "+what+" (it has %s)", r.GetKey(), r.GetName(), quoteNames(have))
		}
		values[r.GetKey()] = v
	}
	return values, nil
}

// quoteNames is the sorted, quoted names of the items that have a value, "none" if none.
func quoteNames(have map[string]string) string {
	var names []string
	for _, n := range slices.Sorted(maps.Keys(have)) {
		if have[n] != "" {
			names = append(names, strconv.Quote(n))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
