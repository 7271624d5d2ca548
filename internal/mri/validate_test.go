package mri

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// validMachine is a machine every runtime's contract check accepts.
func validMachine() *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{LabelMachineUID: "u1"}},
		Spec: &mriv1alpha1.MachineSpec{
			Resources:    &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
			Image:        &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:" + strings.Repeat("0", 64)},
			Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
			Power:        mriv1alpha1.Power_POWER_ON,
			FirstBoot:    &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\n")},
			Volumes: []*mriv1alpha1.Volume{
				{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}},
				{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 20}}},
				{Name: "shared", Source: &mriv1alpha1.Volume_Handle{Handle: "default/shared"}},
			},
			NetworkInterfaces: []*mriv1alpha1.NetworkInterface{
				{Name: "eth0", Network: "default"},
				{Name: "eth1", Network: "storage", MacAddress: "52:54:00:12:34:56"},
			},
		},
	}
}

func emptyDisk(name string, size int64) *mriv1alpha1.Volume {
	return &mriv1alpha1.Volume{Name: name, Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: size}}}
}

func TestValidateCreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m *mriv1alpha1.Machine)
		// says is part of the message, which tells the caller what to fix; "" for none.
		says string
	}{
		{"valid", func(*mriv1alpha1.Machine) {}, ""},
		{"no first boot", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot = nil }, ""},
		{"first boot NONE", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE}
		}, ""},
		{"no volumes or network interfaces", func(m *mriv1alpha1.Machine) { m.Spec.Volumes, m.Spec.NetworkInterfaces = nil, nil }, ""},
		{"image disk of size 0 keeps the image's", func(m *mriv1alpha1.Machine) {
			m.Spec.Volumes[0].Source = &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: 0}}
		}, ""},
		{"power off", func(m *mriv1alpha1.Machine) { m.Spec.Power = mriv1alpha1.Power_POWER_OFF }, ""},
		{"hostname", func(m *mriv1alpha1.Machine) { m.Spec.Hostname = "Web-1.example" }, ""},
		{"hostname with a line break", func(m *mriv1alpha1.Machine) { m.Spec.Hostname = "vm\ninstance-id: other" },
			`spec.hostname "vm\ninstance-id: other" is not a hostname`},
		{"hostname with DEL", func(m *mriv1alpha1.Machine) { m.Spec.Hostname = "vm\x7f" }, "is not a hostname"},
		{"hostname too long", func(m *mriv1alpha1.Machine) { m.Spec.Hostname = strings.Repeat("a", 254) }, "is not a hostname"},
		{"host selector with expressions", func(m *mriv1alpha1.Machine) {
			m.Spec.HostSelector = map[string]string{"rack": "1"}
			m.Spec.HostSelectorExpressions = []*mriv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"reserved"}}, {Key: "gpu", Operator: "DoesNotExist"}}
		}, ""},
		{"host selector operator unknown", func(m *mriv1alpha1.Machine) {
			m.Spec.HostSelectorExpressions = []*mriv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Lacks", Values: []string{"reserved"}}}
		}, `"Lacks" is not a valid label selector operator`},
		{"host selector In without values", func(m *mriv1alpha1.Machine) {
			m.Spec.HostSelectorExpressions = []*mriv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}
		}, "spec.host_selector"},

		{"metadata", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{"anvil-index": "0", "Rack_1.slot": "a: b\nc", "x": strings.Repeat("é", MaxMetaDataValueLen)}
		}, ""},
		{"metadata with format NONE", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: map[string]string{"k": "v"}}
		}, ""},
		{"metadata key the runtime writes", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.MetaData = map[string]string{"Local-Hostname": "evil"} },
			`spec.first_boot.meta_data: key "Local-Hostname" is written by the runtime itself`},
		{"metadata key instance-id", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.MetaData = map[string]string{"instance-id": "x"} },
			`key "instance-id" is written by the runtime itself`},
		{"metadata key with a line break", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.MetaData = map[string]string{"a\ninstance-id": "x"} },
			`key "a\ninstance-id": use letters, digits`},
		{"metadata key with a colon", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.MetaData = map[string]string{"a: b": "x"} }, "use letters, digits"},
		{"metadata key ending in a dash", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.MetaData = map[string]string{"a-": "x"} }, "use letters, digits"},
		{"metadata key too long", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{strings.Repeat("k", 64): "x"}
		},
			"at most 63 characters"},
		{"metadata value too long", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{"k": strings.Repeat("v", MaxMetaDataValueLen+1)}
		}, `key "k": the value has 1025 characters; at most 1024`},
		{"metadata of too many keys", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{}
			for i := range MaxMetaDataKeys + 1 {
				m.Spec.FirstBoot.MetaData[fmt.Sprint("k", i)] = "v"
			}
		}, "33 keys; at most 32"},
		{"hardware references", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{"role": "worker"}
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{
				{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"},
				{Key: "disk-serial", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, Name: "sda"}}
		}, ""},
		{"hardware reference field unspecified", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Name: "eth0"}}
		}, `hardware key "mac": field is unspecified: set NIC_MAC_ADDRESS or DISK_SERIAL_NUMBER`},
		{"hardware reference field the MRI does not define", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: 9, Name: "eth0"}}
		}, `hardware key "mac": field is 9, which MRI v1alpha1 does not define`},
		{"hardware reference without a name", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS}}
		}, `hardware key "mac": name is empty`},
		{"hardware reference key also in meta_data", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{"mac": "x"}
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}
		}, `hardware key "mac" is given twice`},
		{"hardware reference key twice", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{
				{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"},
				{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth1"}}
		}, `hardware key "mac" is given twice`},
		{"hardware reference key the runtime writes", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "UUID", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}
		}, `key "UUID" is written by the runtime itself`},
		{"hardware reference key with a line break", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "a\nb", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}
		}, "use letters, digits"},
		{"metadata and hardware references of too many keys together", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.MetaData = map[string]string{}
			for i := range MaxMetaDataKeys {
				m.Spec.FirstBoot.MetaData[fmt.Sprint("k", i)] = "v"
			}
			m.Spec.FirstBoot.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"}}
		}, "33 keys; at most 32"},

		{"no spec", func(m *mriv1alpha1.Machine) { m.Spec = nil }, "spec is required"},
		{"no machine", nil, "spec is required"},
		{"no uid label", func(m *mriv1alpha1.Machine) { m.Metadata.Labels = map[string]string{"team": "a"} }, "label " + LabelMachineUID + " is required"},
		{"no metadata", func(m *mriv1alpha1.Machine) { m.Metadata = nil }, "label " + LabelMachineUID + " is required"},

		// E2: every enum the caller sets.
		{"power unspecified", func(m *mriv1alpha1.Machine) { m.Spec.Power = mriv1alpha1.Power_POWER_UNSPECIFIED },
			"spec.power is unspecified: set POWER_ON or POWER_OFF"},
		{"architecture unspecified", func(m *mriv1alpha1.Machine) { m.Spec.Architecture = mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED },
			"spec.architecture is unspecified: set AMD64"},
		{"first boot format unspecified", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.Format = mriv1alpha1.ConfigFormat_CONFIG_FORMAT_UNSPECIFIED
		}, "spec.first_boot.format is unspecified: set NONE, IGNITION or CLOUD_INIT"},
		{"empty first boot", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{} },
			"spec.first_boot.format is unspecified"},
		{"power the MRI does not define", func(m *mriv1alpha1.Machine) { m.Spec.Power = 9 },
			"spec.power is 9, which MRI v1alpha1 does not define: set POWER_ON or POWER_OFF"},
		{"architecture the MRI does not define", func(m *mriv1alpha1.Machine) { m.Spec.Architecture = 42 },
			"spec.architecture is 42"},
		{"first boot format the MRI does not define", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.Format = 7 },
			"spec.first_boot.format is 7"},

		{"no resources", func(m *mriv1alpha1.Machine) { m.Spec.Resources = nil }, "spec.resources needs cpu and memory"},
		{"no cpu", func(m *mriv1alpha1.Machine) { m.Spec.Resources.MilliCpu = 0 }, "spec.resources needs cpu and memory"},
		{"negative memory", func(m *mriv1alpha1.Machine) { m.Spec.Resources.MemoryBytes = -1 }, "spec.resources needs cpu and memory"},
		{"negative extended resource", func(m *mriv1alpha1.Machine) { m.Spec.Resources.Extended = map[string]int64{"example.com/gpu": -1} },
			`spec.resources.extended["example.com/gpu"] is -1`},
		{"no image", func(m *mriv1alpha1.Machine) { m.Spec.Image = nil }, "spec.image needs a reference and its sha256 digest"},
		{"no reference", func(m *mriv1alpha1.Machine) { m.Spec.Image.Reference = "" }, "resolve the reference first"},
		{"no digest", func(m *mriv1alpha1.Machine) { m.Spec.Image.Digest = "" }, "resolve the reference first"},
		{"digest not sha256", func(m *mriv1alpha1.Machine) { m.Spec.Image.Digest = "md5:abc" }, "its sha256 digest"},

		{"volume without a name", func(m *mriv1alpha1.Machine) { m.Spec.Volumes[1].Name = "" }, "a volume needs a name"},
		{"volume without a source", func(m *mriv1alpha1.Machine) { m.Spec.Volumes[1].Source = nil }, "volume data needs a source"},
		{"image disk of negative size", func(m *mriv1alpha1.Machine) {
			m.Spec.Volumes[0].Source = &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: -1}}
		}, "volume root: negative size"},
		{"empty disk without a size", func(m *mriv1alpha1.Machine) { m.Spec.Volumes[1] = emptyDisk("data", 0) }, "volume data: an empty disk needs a size"},
		{"empty handle", func(m *mriv1alpha1.Machine) { m.Spec.Volumes[2].Source = &mriv1alpha1.Volume_Handle{} }, "volume shared: the handle is empty"},
		{"volume twice", func(m *mriv1alpha1.Machine) { m.Spec.Volumes = append(m.Spec.Volumes, emptyDisk("root", 1)) },
			`volume "root" appears twice`},

		{"network interface without a name", func(m *mriv1alpha1.Machine) { m.Spec.NetworkInterfaces[1].Name = "" },
			"a network interface needs a name and a network"},
		{"network interface without a network", func(m *mriv1alpha1.Machine) { m.Spec.NetworkInterfaces[1].Network = "" },
			"a network interface needs a name and a network"},
		{"MAC address that is not one", func(m *mriv1alpha1.Machine) { m.Spec.NetworkInterfaces[1].MacAddress = "52:54:00" },
			`network interface eth1: MAC address "52:54:00" is not xx:xx:xx:xx:xx:xx`},
		{"MAC address of 8 bytes", func(m *mriv1alpha1.Machine) { m.Spec.NetworkInterfaces[1].MacAddress = "02:00:5e:10:00:00:00:01" },
			"is not xx:xx:xx:xx:xx:xx"},
		{"network interface twice", func(m *mriv1alpha1.Machine) {
			m.Spec.NetworkInterfaces = append(m.Spec.NetworkInterfaces, &mriv1alpha1.NetworkInterface{Name: "eth0", Network: "storage"})
		}, `network interface "eth0" appears twice`},

		// The first rule broken is the one reported.
		{"spec before labels", func(m *mriv1alpha1.Machine) {
			m.Spec.Power, m.Metadata.Labels = 0, nil
		}, "spec.power is unspecified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m *mriv1alpha1.Machine
			if tc.change != nil {
				m = validMachine()
				tc.change(m)
			}
			err := ValidateCreate(m)
			if tc.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID {
				t.Fatalf("%v, want InvalidArgument/INVALID", err)
			}
			if msg := MessageOf(err); !strings.Contains(msg, tc.says) {
				t.Fatalf("message %q does not say %q", msg, tc.says)
			}
		})
	}
}

// Attach calls check a volume or network interface as a create does.
func TestValidateAttached(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		valid bool
	}{
		{"empty disk", ValidateVolume(emptyDisk("data", 1)), true},
		{"handle", ValidateVolume(&mriv1alpha1.Volume{Name: "v", Source: &mriv1alpha1.Volume_Handle{Handle: "ns/v"}}), true},
		{"nil volume", ValidateVolume(nil), false},
		{"volume without a source", ValidateVolume(&mriv1alpha1.Volume{Name: "data"}), false},
		{"empty disk of size 0", ValidateVolume(emptyDisk("data", 0)), false},
		{"network interface", ValidateNetworkInterface(&mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default"}), true},
		{"upper-case MAC", ValidateNetworkInterface(&mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default", MacAddress: "52:54:00:AB:CD:EF"}), true},
		{"nil network interface", ValidateNetworkInterface(nil), false},
		{"network interface without a network", ValidateNetworkInterface(&mriv1alpha1.NetworkInterface{Name: "eth1"}), false},
	} {
		if tc.valid != (tc.err == nil) || (!tc.valid && ReasonOf(tc.err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID) {
			t.Errorf("%s: %v, want valid %v or INVALID", tc.name, tc.err, tc.valid)
		}
	}
}

func TestValidateReimage(t *testing.T) {
	img := &mriv1alpha1.Image{Reference: "registry.example/os:2", Digest: "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		name string
		req  *mriv1alpha1.ReimageMachineRequest
		want string // "" for valid
	}{
		{"valid", &mriv1alpha1.ReimageMachineRequest{Id: "m-1", Image: img}, ""},
		{"valid with first boot", &mriv1alpha1.ReimageMachineRequest{Id: "m-1", Image: img,
			FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\n")}}, ""},
		{"no id", &mriv1alpha1.ReimageMachineRequest{Image: img}, "id is required"},
		{"no image", &mriv1alpha1.ReimageMachineRequest{Id: "m-1"}, "image needs a reference and its sha256 digest"},
		{"a tag only", &mriv1alpha1.ReimageMachineRequest{Id: "m-1", Image: &mriv1alpha1.Image{Reference: img.Reference}}, "image needs a reference and its sha256 digest"},
		{"unspecified first-boot format", &mriv1alpha1.ReimageMachineRequest{Id: "m-1", Image: img, FirstBoot: &mriv1alpha1.FirstBootConfig{}},
			"first_boot.format is unspecified"},
	} {
		err := ValidateReimage(tc.req)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID):
			t.Errorf("%s: %v, want INVALID saying %q", tc.name, err, tc.want)
		}
	}
}

func TestResolveHardware(t *testing.T) {
	mac := func(key, name string) *mriv1alpha1.HardwareMetaData {
		return &mriv1alpha1.HardwareMetaData{Key: key, Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: name}
	}
	serial := func(key, name string) *mriv1alpha1.HardwareMetaData {
		return &mriv1alpha1.HardwareMetaData{Key: key, Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, Name: name}
	}
	hw := HardwareNames{NICs: map[string]string{"eth0": "52:54:00:00:00:01", "eth1": ""}, Disks: map[string]string{"sda": "S123", "sdb": ""}}
	for _, tc := range []struct {
		name string
		refs []*mriv1alpha1.HardwareMetaData
		hw   HardwareNames
		want map[string]string
		says string
	}{
		{"none", nil, hw, map[string]string{}, ""},
		{"MAC and serial", []*mriv1alpha1.HardwareMetaData{mac("mac", "eth0"), serial("disk", "sda")}, hw,
			map[string]string{"mac": "52:54:00:00:00:01", "disk": "S123"}, ""},
		{"NIC missing", []*mriv1alpha1.HardwareMetaData{mac("mac", "eno1")}, hw, nil,
			`hardware key "mac": no NIC "eno1" with a MAC address (it has "eth0")`},
		{"NIC without a MAC", []*mriv1alpha1.HardwareMetaData{mac("mac", "eth1")}, hw, nil, `no NIC "eth1" with a MAC address`},
		{"disk without a serial", []*mriv1alpha1.HardwareMetaData{serial("s", "sdb")}, hw, nil,
			`hardware key "s": no disk "sdb" with a serial number (it has "sda")`},
		{"no disks at all", []*mriv1alpha1.HardwareMetaData{serial("s", "sda")}, HardwareNames{}, nil, `(it has none)`},
		{"field unspecified", []*mriv1alpha1.HardwareMetaData{{Key: "x", Name: "eth0"}}, hw, nil, `hardware key "x": field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveHardware(tc.refs, tc.hw)
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("ResolveHardware: %v, want an error saying %q", err, tc.says)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ResolveHardware = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestHardwareMetaDataToMRI(t *testing.T) {
	got := HardwareMetaDataToMRI([]computev1alpha1.HardwareMetaData{
		{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"},
		{Key: "sn", Field: computev1alpha1.HardwareDiskSerialNumber, Name: "sda"},
		{Key: "x", Field: "SystemSerial", Name: "x"},
	})
	want := []mriv1alpha1.HardwareField{mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS,
		mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, mriv1alpha1.HardwareField_HARDWARE_FIELD_UNSPECIFIED}
	if len(got) != 3 {
		t.Fatalf("HardwareMetaDataToMRI gave %d references, want 3", len(got))
	}
	for i, r := range got {
		if r.GetField() != want[i] {
			t.Errorf("reference %d: field %v, want %v", i, r.GetField(), want[i])
		}
	}
	if HardwareMetaDataToMRI(nil) != nil {
		t.Error("no references should give nil")
	}
}
