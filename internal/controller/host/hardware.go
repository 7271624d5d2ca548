package host

import (
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// HardwareSpec converts what the provisioner found. The Host's declared architecture
// stands in when inspection did not report one.
func HardwareSpec(hw provisioner.Hardware, h *metalv1alpha1.Host) metalv1alpha1.HardwareDataSpec {
	arch := computev1alpha1.Architecture(hw.Architecture)
	if !arch.IsKnown() {
		arch = h.Spec.Architecture
	}
	s := metalv1alpha1.HardwareDataSpec{
		Architecture: arch,
		CPU:          metalv1alpha1.CPU{Count: int32(hw.CPUCount), Model: hw.CPUModel},
		MemoryMiB:    hw.MemoryMiB,
	}
	for _, d := range hw.Disks {
		s.Disks = append(s.Disks, metalv1alpha1.Disk{Name: d.Name, SizeBytes: d.SizeBytes, Rotational: d.Rotational,
			SerialNumber: d.SerialNumber, WWN: d.WWN, Model: d.Model})
	}
	for _, n := range hw.NICs {
		s.NICs = append(s.NICs, metalv1alpha1.NIC{Name: n.Name, MACAddress: n.MACAddress, IP: n.IP, SpeedGbps: int32(n.SpeedGbps)})
	}
	return s
}

// Summary is the short form shown in the Host's status.
func Summary(s *metalv1alpha1.HardwareDataSpec) *metalv1alpha1.HardwareSummary {
	return &metalv1alpha1.HardwareSummary{Architecture: s.Architecture, CPUs: s.CPU.Count, MemoryMiB: s.MemoryMiB,
		Disks: int32(len(s.Disks)), NICs: int32(len(s.NICs))}
}
