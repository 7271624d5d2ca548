package conformance

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

const invalid = mriv1alpha1.ErrorReason_ERROR_REASON_INVALID

// unspecifiedRefused: every enum the caller sets is refused UNSPECIFIED with INVALID, so
// that a missing field never means a default (E2).
func (s *suite) unspecifiedRefused(t *testing.T) {
	for _, tc := range []struct {
		field  string
		change func(*mriv1alpha1.Machine)
	}{
		{"spec.power", func(m *mriv1alpha1.Machine) { m.Spec.Power = mriv1alpha1.Power_POWER_UNSPECIFIED }},
		{"spec.architecture", func(m *mriv1alpha1.Machine) { m.Spec.Architecture = mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED }},
		{"spec.first_boot.format", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_UNSPECIFIED, Data: []byte("#cloud-config\n")}
		}},
	} {
		t.Run("CreateMachine_"+tc.field, func(t *testing.T) { s.refused(t, tc.change, codes.InvalidArgument, invalid) })
	}
	t.Run("UpdateMachinePower", func(t *testing.T) {
		created := s.create(t, s.newMachine(t))
		_, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: created.Metadata.Id})
		wantReason(t, err, codes.InvalidArgument, invalid)
	})
}

// malformedRefused: a create whose spec breaks the contract is refused with INVALID by
// every runtime, whatever its own limits (E1).
func (s *suite) malformedRefused(t *testing.T) {
	emptyDisk := func(name string, size int64) *mriv1alpha1.Volume {
		return &mriv1alpha1.Volume{Name: name, Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: size}}}
	}
	addVolumes := func(v ...*mriv1alpha1.Volume) func(*mriv1alpha1.Machine) {
		return func(m *mriv1alpha1.Machine) { m.Spec.Volumes = append(m.Spec.Volumes, v...) }
	}
	addNICs := func(n ...*mriv1alpha1.NetworkInterface) func(*mriv1alpha1.Machine) {
		return func(m *mriv1alpha1.Machine) { m.Spec.NetworkInterfaces = append(m.Spec.NetworkInterfaces, n...) }
	}
	for _, tc := range []struct {
		name   string
		change func(*mriv1alpha1.Machine)
	}{
		{"no spec", func(m *mriv1alpha1.Machine) { m.Spec = nil }},
		{"no machine-uid label", func(m *mriv1alpha1.Machine) { delete(m.Metadata.Labels, mri.LabelMachineUID) }},
		{"power the MRI does not define", func(m *mriv1alpha1.Machine) { m.Spec.Power = 99 }},
		{"architecture the MRI does not define", func(m *mriv1alpha1.Machine) { m.Spec.Architecture = 99 }},
		{"first_boot.format the MRI does not define", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: 99}
		}},
		{"first_boot.meta_data with a key the runtime writes (F1)", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: map[string]string{"instance-id": "other"}}
		}},
		{"first_boot.meta_data key with a line break (F1)", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: map[string]string{"a\nb": "v"}}
		}},
		{"first_boot.hardware_meta_data with an unspecified field (F2)", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE,
				HardwareMetaData: []*mriv1alpha1.HardwareMetaData{{Key: "mac", Name: "eth0"}}}
		}},
		{"first_boot.hardware_meta_data key also in meta_data (F2)", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: map[string]string{"mac": "x"},
				HardwareMetaData: []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}}
		}},
		{"no resources", func(m *mriv1alpha1.Machine) { m.Spec.Resources = nil }},
		{"no cpu", func(m *mriv1alpha1.Machine) {
			m.Spec.Resources = &mriv1alpha1.Resources{MemoryBytes: m.Spec.GetResources().GetMemoryBytes()}
		}},
		{"no memory", func(m *mriv1alpha1.Machine) {
			m.Spec.Resources = &mriv1alpha1.Resources{MilliCpu: m.Spec.GetResources().GetMilliCpu()}
		}},
		{"negative extended resource", func(m *mriv1alpha1.Machine) {
			m.Spec.Resources = &mriv1alpha1.Resources{MilliCpu: m.Spec.GetResources().GetMilliCpu(),
				MemoryBytes: m.Spec.GetResources().GetMemoryBytes(), Extended: map[string]int64{"example.com/gpu": -1}}
		}},
		{"no image", func(m *mriv1alpha1.Machine) { m.Spec.Image = nil }},
		{"hostname that is not one", func(m *mriv1alpha1.Machine) { m.Spec.Hostname = "vm\ninstance-id: other" }},
		{"image without a reference", func(m *mriv1alpha1.Machine) {
			m.Spec.Image = &mriv1alpha1.Image{Digest: m.Spec.GetImage().GetDigest()}
		}},
		{"image without a digest", func(m *mriv1alpha1.Machine) {
			m.Spec.Image = &mriv1alpha1.Image{Reference: m.Spec.GetImage().GetReference()}
		}},
		{"digest not sha256", func(m *mriv1alpha1.Machine) {
			m.Spec.Image = &mriv1alpha1.Image{Reference: m.Spec.GetImage().GetReference(), Digest: "md5:d41d8cd98f00b204e9800998ecf8427e"}
		}},
		{"volume without a name", addVolumes(emptyDisk("", 1<<20))},
		{"volume without a source", addVolumes(&mriv1alpha1.Volume{Name: "data"})},
		{"empty disk without a size", addVolumes(emptyDisk("data", 0))},
		{"volume name twice", addVolumes(emptyDisk("data", 1<<20), emptyDisk("data", 1<<20))},
		{"network interface without a name", addNICs(&mriv1alpha1.NetworkInterface{Network: "default"})},
		{"network interface without a network", addNICs(&mriv1alpha1.NetworkInterface{Name: "eth9"})},
		{"MAC address that is not one", addNICs(&mriv1alpha1.NetworkInterface{Name: "eth9", Network: "default", MacAddress: "not-a-mac"})},
		{"network interface name twice", addNICs(
			&mriv1alpha1.NetworkInterface{Name: "eth9", Network: "default"}, &mriv1alpha1.NetworkInterface{Name: "eth9", Network: "default"})},
	} {
		t.Run(tc.name, func(t *testing.T) { s.refused(t, tc.change, codes.InvalidArgument, invalid) })
	}
}

// imageNotFound: an image the runtime cannot find is refused with IMAGE_NOT_FOUND before
// the call returns (E1).
func (s *suite) imageNotFound(t *testing.T) {
	if s.target.MissingImage == nil {
		t.Fatal("Target.MissingImage is not set: give an image the runtime's registry lacks")
	}
	s.refused(t, func(m *mriv1alpha1.Machine) { m.Spec.Image = clone(s.target.MissingImage) },
		codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND)
}

// imageWithoutArchitecture: an image with no entry for the machine's architecture is
// refused with WRONG_ARCHITECTURE, though the pool runs the architecture (E1).
func (s *suite) imageWithoutArchitecture(t *testing.T) {
	if s.target.WrongArchImage == nil {
		t.Fatal("Target.WrongArchImage is not set: give an image without an entry for the architecture of Target.Spec")
	}
	s.refused(t, func(m *mriv1alpha1.Machine) { m.Spec.Image = clone(s.target.WrongArchImage) },
		codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE)
}

// refused creates a machine of the target's spec after change, wants the create refused
// with code and reason, and no machine made under its uid: a refusal creates nothing.
func (s *suite) refused(t *testing.T, change func(*mriv1alpha1.Machine), code codes.Code, reason mriv1alpha1.ErrorReason) {
	t.Helper()
	m := s.newMachine(t)
	uid := m.Metadata.Labels[mri.LabelMachineUID]
	change(m)
	resp, err := s.c.CreateMachine(ctx(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
	if err == nil {
		t.Cleanup(func() {
			_, _ = s.c.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: resp.GetMachine().GetMetadata().GetId()})
		})
	}
	wantReason(t, err, code, reason)
	list, err := s.c.ListMachines(ctx(t), &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{mri.LabelMachineUID: uid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Machines) != 0 {
		t.Errorf("the refused create left %d machines: %v", len(list.Machines), list.Machines)
	}
}
