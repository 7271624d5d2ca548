package poollet

import (
	"fmt"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Labels a poollet puts on runtime machines, besides mri.LabelMachineUID, so an event or
// a leftover machine leads back to its Machine object.
const (
	LabelMachineNamespace = mri.LabelMachineNamespace
	LabelMachineName      = "anvil.dev/machine-name"
)

// volumesToMRI converts the Machine's volumes. A referenced Volume is passed by handle
// (namespace/name); ephemeral ones by the name of the Volume created for the Machine.
func volumesToMRI(m *computev1alpha1.Machine) []*mriv1alpha1.Volume {
	out := make([]*mriv1alpha1.Volume, 0, len(m.Spec.Volumes))
	for _, v := range m.Spec.Volumes {
		mv := &mriv1alpha1.Volume{Name: v.Name}
		switch {
		case v.Image != nil:
			var size int64
			if v.Image.Size != nil {
				size = v.Image.Size.Value()
			}
			mv.Source = &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: size}}
		case v.EmptyDisk != nil:
			mv.Source = &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: v.EmptyDisk.Size.Value()}}
		case v.VolumeRef != nil:
			mv.Source = &mriv1alpha1.Volume_Handle{Handle: m.Namespace + "/" + v.VolumeRef.Name}
		case v.Ephemeral != nil:
			mv.Source = &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: v.Ephemeral.VolumeTemplate.Spec.Size.Value()}}
		}
		out = append(out, mv)
	}
	return out
}

// nicsToMRI converts the Machine's NICs; refs holds the spec of each referenced
// NetworkInterface by name. A reference that is missing is an error: the runtime must not
// guess a network.
func nicsToMRI(m *computev1alpha1.Machine, refs map[string]computev1alpha1.NetworkInterfaceSpec) ([]*mriv1alpha1.NetworkInterface, error) {
	out := make([]*mriv1alpha1.NetworkInterface, 0, len(m.Spec.NetworkInterfaces))
	for _, n := range m.Spec.NetworkInterfaces {
		var s computev1alpha1.NetworkInterfaceSpec
		switch {
		case n.Ephemeral != nil:
			s = n.Ephemeral.NetworkInterfaceTemplate.Spec
		case n.NetworkInterfaceRef != nil:
			ref, ok := refs[n.NetworkInterfaceRef.Name]
			if !ok {
				return nil, fmt.Errorf("NetworkInterface %s does not exist", n.NetworkInterfaceRef.Name)
			}
			s = ref
		}
		out = append(out, &mriv1alpha1.NetworkInterface{Name: n.Name, Network: s.Network, MacAddress: s.MACAddress, Ips: s.IPs})
	}
	return out, nil
}
