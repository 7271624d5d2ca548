package mapping

import (
	"maps"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

const (
	testUID    = "0b6c2c1e-5a57-4d0f-9f0e-3b2f7b8c2a11"
	testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var testTarget = Target{Namespace: "site-a", Pool: "region-broker", PoolSelector: map[string]string{"zone": "a"}}

// machine is a valid upstream machine with every field the broker carries set.
func machine(mut ...func(*mriv1alpha1.Machine)) *mriv1alpha1.Machine {
	m := &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{
			Labels:      map[string]string{mri.LabelMachineUID: testUID, upstreamNamespaceLabel: "tenant", upstreamNameLabel: "web-1"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: &mriv1alpha1.MachineSpec{
			Class:        "small",
			Resources:    &mriv1alpha1.Resources{MilliCpu: 2000, MemoryBytes: 4 << 30},
			Image:        &mriv1alpha1.Image{Reference: "registry.example/os/debian:12", Digest: testDigest},
			Architecture: mriv1alpha1.Architecture_ARCHITECTURE_ARM64,
			Power:        mriv1alpha1.Power_POWER_ON,
			FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT,
				Data: []byte("#cloud-config\n"), MetaData: map[string]string{"role": "web"},
				HardwareMetaData: []*mriv1alpha1.HardwareMetaData{{Key: "mac0", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}},
			Volumes: []*mriv1alpha1.Volume{
				{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: 10 << 30}}},
				{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 30}}},
			},
			NetworkInterfaces:       []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default", MacAddress: "52:54:00:00:00:01", Ips: []string{"10.0.0.5"}}},
			HostSelector:            map[string]string{"rack": "r1"},
			HostSelectorExpressions: []*mriv1alpha1.LabelSelectorRequirement{{Key: "gpu", Operator: "In", Values: []string{"a100"}}},
			Hostname:                "web-1",
			Placement: &mriv1alpha1.Placement{Tolerations: []*mriv1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "web", Effect: "NoSchedule"}},
				NativeOnly: true},
		},
	}
	m.Metadata.Labels = maps.Clone(m.Metadata.Labels)
	for _, f := range mut {
		f(m)
	}
	return m
}
