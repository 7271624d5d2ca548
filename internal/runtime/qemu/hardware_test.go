package qemu

import (
	"maps"
	"strings"
	"testing"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// A VM answers a NIC's MAC (the one QEMU is given) and refuses a disk serial and a NIC it
// lacks, naming why; the spec's own metadata is kept beside the values.
func TestFirstBootMetaData(t *testing.T) {
	mac := func(key, nic string) *mriv1alpha1.HardwareMetaData {
		return &mriv1alpha1.HardwareMetaData{Key: key, Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: nic}
	}
	nics := map[string]string{"eth0": "52:54:00:12:34:56", "eth1": "52:54:00:ab:cd:ef"}
	for _, tc := range []struct {
		name string
		fb   *mriv1alpha1.FirstBootConfig
		want map[string]string
		says string
	}{
		{"metadata only", &mriv1alpha1.FirstBootConfig{MetaData: map[string]string{"role": "worker"}}, map[string]string{"role": "worker"}, ""},
		{"NIC MACs beside metadata", &mriv1alpha1.FirstBootConfig{MetaData: map[string]string{"role": "worker"},
			HardwareMetaData: []*mriv1alpha1.HardwareMetaData{mac("mac", "eth0"), mac("mac1", "eth1")}},
			map[string]string{"role": "worker", "mac": "52:54:00:12:34:56", "mac1": "52:54:00:ab:cd:ef"}, ""},
		{"a NIC the VM lacks", &mriv1alpha1.FirstBootConfig{HardwareMetaData: []*mriv1alpha1.HardwareMetaData{mac("mac", "eno1")}}, nil,
			`hardware key "mac": no NIC "eno1" with a MAC address (it has "eth0", "eth1"): a VM's NICs are the spec's network_interfaces`},
		{"a disk serial", &mriv1alpha1.FirstBootConfig{HardwareMetaData: []*mriv1alpha1.HardwareMetaData{
			{Key: "sn", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, Name: "root"}}}, nil,
			`hardware key "sn": a VM has no disk serial numbers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := firstBootMetaData(tc.fb, nics)
			if tc.says != "" {
				if mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID || !strings.Contains(mri.MessageOf(err), tc.says) {
					t.Fatalf("firstBootMetaData: %v, want INVALID saying %q", err, tc.says)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("firstBootMetaData = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
