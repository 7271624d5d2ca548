package metal

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

func TestRecordRoundTrip(t *testing.T) {
	spec := &mriv1alpha1.MachineSpec{Class: "c", Power: mriv1alpha1.Power_POWER_ON, Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Resources:    &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30, Extended: map[string]int64{"anvil.dev/hosts": 1}},
		FirstBoot:    &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION, Data: []byte(`{"ignition":{"password":"secret"}}`)},
		HostSelector: map[string]string{"rack": "1"}}
	h := claimed()
	rec := &record{ID: "pool-x", Labels: map[string]string{"a": "b"}, Generation: 3, CreatedAt: 7}
	if err := encodeRecord(h, rec, spec); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.Annotations[AnnotationMachine], "secret") {
		t.Fatalf("the record on the Host holds first-boot data: %s", h.Annotations[AnnotationMachine])
	}
	got, gotSpec, err := decodeRecord(h)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(spec).(*mriv1alpha1.MachineSpec)
	want.FirstBoot.Data = nil
	if !proto.Equal(gotSpec, want) || got.ID != rec.ID || got.Generation != 3 || got.Labels["a"] != "b" {
		t.Fatalf("decoded %+v %v", got, gotSpec)
	}
	h.Spec.ConsumerRef = nil
	if r, _, _ := decodeRecord(h); r != nil {
		t.Fatal("a Host without a consumer reports a machine")
	}
}

func TestMachineIDs(t *testing.T) {
	a, b := machineID("pool", "ns/uid-1"), machineID("pool", "ns/uid-2")
	if a == b || a != machineID("pool", "ns/uid-1") || strings.ContainsAny(a, "/") {
		t.Fatalf("ids %s %s", a, b)
	}
	if n := configDriveName("ns/uid-1"); len(n) > 63 || strings.ContainsAny(n, "/") {
		t.Fatalf("secret name %s", n)
	}
}

func TestMetaData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		host   string
		want   map[string]string
		meta   map[string]string
	}{
		{"first-boot metadata under meta", map[string]string{mri.LabelMachineUID: "u1", LabelMachineName: "web"}, "",
			map[string]string{"uuid": "u1", "name": "web", "hostname": "web", "local-hostname": "web"},
			map[string]string{"anvil-index": "2", "inject": "x\", \"uuid\": \"evil\n"}},
		{"hostname from the spec", map[string]string{mri.LabelMachineUID: "u1", LabelMachineName: "web"}, "web-1.example",
			map[string]string{"uuid": "u1", "name": "web", "hostname": "web-1.example", "local-hostname": "web-1.example"}, nil},
		{"hostname from the Machine", map[string]string{mri.LabelMachineUID: "u1", LabelMachineName: "web"}, "",
			map[string]string{"uuid": "u1", "name": "web", "hostname": "web", "local-hostname": "web"}, nil},
		{"no Machine name", map[string]string{mri.LabelMachineUID: "u1"}, "",
			map[string]string{"uuid": "u1", "name": "pool-1", "hostname": "pool-1", "local-hostname": "pool-1"}, nil},
		{"Machine name that is not a hostname", map[string]string{mri.LabelMachineUID: "u1", LabelMachineName: "web\n1"}, "",
			map[string]string{"uuid": "u1", "name": "web\n1", "hostname": "pool-1", "local-hostname": "pool-1"}, nil},
	} {
		raw, err := metaData("pool-1", tc.labels, &mriv1alpha1.MachineSpec{Hostname: tc.host,
			FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: tc.meta}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Meta map[string]string `json:"meta"`
		}
		var top map[string]string
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Meta, tc.meta) {
			t.Errorf("%s: meta %v, want %v", tc.name, got.Meta, tc.meta)
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(raw, &all); err != nil {
			t.Fatal(err)
		}
		delete(all, "meta") // the rest are strings
		if raw, err = json.Marshal(all); err != nil || json.Unmarshal(raw, &top) != nil {
			t.Fatalf("%s: top-level keys are not strings: %s", tc.name, raw)
		}
		if len(top) != len(tc.want) {
			t.Errorf("%s: meta_data %v, want %v", tc.name, top, tc.want)
		}
		for k, v := range tc.want {
			if top[k] != v {
				t.Errorf("%s: meta_data %v, want %v", tc.name, top, tc.want)
			}
		}
	}
}

func TestConfigDriveSecret(t *testing.T) {
	labels := map[string]string{mri.LabelMachineUID: "u1"}
	s, err := configDriveSecret("infra", "pool-1", labels, &mriv1alpha1.MachineSpec{
		FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\n")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["user_data"]) != "#cloud-config\n" || s.Annotations[AnnotationMachineID] != "pool-1" || s.Name != configDriveName("u1") {
		t.Fatalf("secret %+v", s)
	}
	s, _ = configDriveSecret("infra", "pool-1", labels, &mriv1alpha1.MachineSpec{
		FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, Data: []byte("ignored")}}, nil)
	if _, ok := s.Data["user_data"]; ok {
		t.Fatal("format NONE wrote user_data")
	}
}

// The values of the hardware references join meta beside the spec's keys, also for a
// machine with no metaData of its own.
func TestMetaDataCarriesHardwareValues(t *testing.T) {
	labels := map[string]string{mri.LabelMachineUID: "u1"}
	hw := map[string]string{"mac": "52:54:00:00:00:01"}
	for _, tc := range []struct {
		meta, want map[string]string
	}{
		{map[string]string{"role": "worker"}, map[string]string{"role": "worker", "mac": "52:54:00:00:00:01"}},
		{nil, map[string]string{"mac": "52:54:00:00:00:01"}},
	} {
		spec := &mriv1alpha1.MachineSpec{FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, MetaData: tc.meta}}
		raw, err := metaData("pool-1", labels, spec, hw)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Meta map[string]string `json:"meta"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || !maps.Equal(got.Meta, tc.want) {
			t.Errorf("meta %v (%v), want %v", got.Meta, err, tc.want)
		}
		if len(tc.meta) > 0 && len(spec.FirstBoot.MetaData) != len(tc.meta) {
			t.Errorf("metaData changed the spec's own map: %v", spec.FirstBoot.MetaData)
		}
	}
}

// validateSpec checks what bare metal cannot do; the contract's own checks are
// mri.ValidateCreate's, which CreateMachine makes first.
func TestValidateSpec(t *testing.T) {
	good := func() *mriv1alpha1.MachineSpec {
		return &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON, Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
			Resources: &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
			Image:     &mriv1alpha1.Image{Reference: "r.example/os:1", Digest: "sha256:" + strings.Repeat("0", 64)},
			FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: make([]byte, maxUserData)},
			Volumes:   []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}}}
	}
	if err := validateSpec(good()); err != nil {
		t.Fatal(err)
	}
	for name, breakIt := range map[string]func(*mriv1alpha1.MachineSpec){
		"first boot too large": func(s *mriv1alpha1.MachineSpec) { s.FirstBoot.Data = make([]byte, maxUserData+1) },
		"empty disk": func(s *mriv1alpha1.MachineSpec) {
			s.Volumes = append(s.Volumes, &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1}}})
		},
		"handle": func(s *mriv1alpha1.MachineSpec) {
			s.Volumes = append(s.Volumes, &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_Handle{Handle: "ns/data"}})
		},
		"two image disks": func(s *mriv1alpha1.MachineSpec) {
			s.Volumes = append(s.Volumes, &mriv1alpha1.Volume{Name: "other", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}})
		},
	} {
		s := good()
		breakIt(s)
		if err := validateSpec(s); mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID {
			t.Errorf("%s: %v, want INVALID", name, err)
		}
	}
}
