package qemu

import (
	"os"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/test/testos"
)

// Real guests read their first-boot metadata and print it: a cloud-init guest from its
// NoCloud seed's meta-data, an Ignition guest from fw_cfg opt/anvil/meta-data, and a guest
// with metadata and no config from a seed made for it. A value holding a line break and
// "instance-id: evil" stays that one value: the guest sees no other key, and its hostname
// is still the spec's.
func TestGuestsReadTheirFirstBootMetaData(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64))

	cloud := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	cloud.Hostname = "vm-cloud"
	cloud.FirstBoot.MetaData = map[string]string{"anvil-index": "0", "rack": "r1\nlocal-hostname: evil"}
	// The MAC the runtime gives the NIC, here the spec's own.
	cloud.NetworkInterfaces[0].MacAddress = "52:54:00:12:34:56"
	cloud.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}
	ign := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_ARM64)
	ign.Hostname = "vm-ign"
	ign.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION,
		Data:     []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,vm-ign"}}]}}`),
		MetaData: map[string]string{"anvil-index": "1", "provider-id": "anvil://ns/vm-ign"}}
	none := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	none.Hostname = "vm-none"
	none.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: map[string]string{"anvil-index": "2"}}
	// Only a hardware reference, to the MAC the runtime derives for the NIC: a seed is made
	// for it too.
	refOnly := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	refOnly.Hostname = "vm-ref"
	refOnly.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE,
		HardwareMetaData: []*mriv1alpha1.HardwareMetaData{{Key: "boot-mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}}

	for _, tc := range []struct {
		uid  string
		spec *mriv1alpha1.MachineSpec
		arch computev1alpha1.Architecture
		// marker is the anvil-marker= value in the config (machineSpec's user data has one).
		marker string
		want   []string
		// derived names a key whose value is the MAC derived for the machine's eth0.
		derived string
	}{
		{"cloud", cloud, computev1alpha1.ArchitectureAMD64, "conformance", []string{testos.MetaLine("anvil-index", "0"), testos.MetaLine("mac", "52:54:00:12:34:56"),
			testos.MetaLine("rack", `r1\u000Alocal-hostname: evil`)}, ""},
		{"ign", ign, computev1alpha1.ArchitectureARM64, "none", []string{testos.MetaLine("anvil-index", "1"), testos.MetaLine("provider-id", "anvil://ns/vm-ign")}, ""},
		{"none", none, computev1alpha1.ArchitectureAMD64, "none", []string{testos.MetaLine("anvil-index", "2")}, ""},
		{"ref", refOnly, computev1alpha1.ArchitectureAMD64, "none", nil, "boot-mac"},
	} {
		m := await(t, rt, create(t, rt, tc.uid, tc.spec).Metadata.Id, "ran", isRunning)
		if tc.derived != "" {
			tc.want = []string{testos.MetaLine(tc.derived, derivedMAC(m.Metadata.Id, "eth0"))}
		}
		ready := testos.ReadyLine(tc.arch, tc.spec.Hostname, tc.marker)
		awaitConsole(t, m.Status.Console, ready)
		raw, err := os.ReadFile(m.Status.Console)
		if err != nil {
			t.Fatal(err)
		}
		var meta []string
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "ANVIL-TESTOS-META ") {
				meta = append(meta, l)
			}
		}
		if strings.Join(meta, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: the guest printed metadata\n%s\nwant\n%s", tc.uid, strings.Join(meta, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
