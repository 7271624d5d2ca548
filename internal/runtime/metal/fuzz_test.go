package metal

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// FuzzConfigDrive builds the config drive and the Host's record of any machine spec (as
// protobuf bytes, the way the poollet's call carries it) the runtime accepts. What
// CreateMachine refuses is INVALID; for what it accepts, the config-drive Secret is named
// as Kubernetes requires, its meta_data is the JSON object the Host controller reads, with
// the machine's uid and a hostname a guest can take, its user_data is the first-boot data
// as given (text, since Ironic carries it as a JSON string), and the record on the Host
// gives the spec back without the first-boot data.
func FuzzConfigDrive(f *testing.F) {
	image := &mriv1alpha1.Image{Reference: "r.example/os:1", Digest: "sha256:" + strings.Repeat("0", 64)}
	base := func(fb *mriv1alpha1.FirstBootConfig, hostname string) []byte {
		raw, err := proto.Marshal(&mriv1alpha1.MachineSpec{
			Class: "server", Power: mriv1alpha1.Power_POWER_ON, Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
			Resources: &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30, Extended: map[string]int64{"anvil.dev/hosts": 1}},
			Image:     image, FirstBoot: fb, Hostname: hostname, HostSelector: map[string]string{"rack": "1"},
			Volumes: []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		})
		if err != nil {
			f.Fatal(err)
		}
		return raw
	}
	cloudInit := mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT
	for _, spec := range [][]byte{
		base(nil, ""),
		base(&mriv1alpha1.FirstBootConfig{Format: cloudInit, Data: []byte("#cloud-config\nruncmd: [echo hi]\n")}, "web-1.example"),
		base(&mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION, Data: []byte(`{"ignition":{"version":"3.4.0"}}`)}, ""),
		base(&mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE, Data: []byte("ignored")}, "vm"),
		base(&mriv1alpha1.FirstBootConfig{Format: cloudInit, Data: []byte{0xff, 0xfe}}, ""),
		base(&mriv1alpha1.FirstBootConfig{Format: cloudInit, Data: []byte("#cloud-config\n"), MetaData: map[string]string{"anvil-index": "1", "x": "a\"}, \"uuid\": \"evil"}}, ""),
		base(&mriv1alpha1.FirstBootConfig{Format: cloudInit, MetaData: map[string]string{"uuid": "evil"}}, ""),
		base(&mriv1alpha1.FirstBootConfig{Format: cloudInit, Data: bytes.Repeat([]byte("x"), maxUserData+1)}, ""),
	} {
		f.Add(spec, "ns/uid-1", "web")
		f.Add(spec, "u", "")
	}
	f.Fuzz(func(t *testing.T, rawSpec []byte, uid, name string) {
		spec := &mriv1alpha1.MachineSpec{}
		if proto.Unmarshal(rawSpec, spec) != nil || !utf8.ValidString(uid) || !utf8.ValidString(name) {
			return // gRPC refuses such bytes (protobuf strings are UTF-8) before the runtime sees them
		}
		labels := map[string]string{mri.LabelMachineUID: uid, LabelMachineNamespace: "tenant"}
		if name != "" {
			labels[LabelMachineName] = name
		}
		in := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Labels: labels}, Spec: spec}
		for _, check := range []func() error{func() error { return mri.ValidateCreate(in) }, func() error { return validateSpec(spec) }} {
			if err := check(); err != nil {
				if mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID {
					t.Fatalf("refused without INVALID: %v", err)
				}
				return
			}
		}
		id := machineID("pool", uid)
		secret, err := configDriveSecret("infra", id, labels, spec, nil)
		if err != nil {
			t.Fatalf("config drive of an accepted spec: %v", err)
		}
		if errs := validation.IsDNS1123Subdomain(secret.Name); len(errs) > 0 {
			t.Fatalf("config-drive Secret name %q: %v", secret.Name, errs)
		}
		var meta map[string]any
		if err := json.Unmarshal(secret.Data["meta_data"], &meta); err != nil {
			t.Fatalf("meta_data is not the JSON object the Host controller reads: %v", err)
		}
		if meta["uuid"] != uid {
			t.Fatalf("meta_data uuid %v, want the machine's uid %q", meta["uuid"], uid)
		}
		hostname, _ := meta["hostname"].(string)
		if errs := validation.IsDNS1123Subdomain(strings.ToLower(hostname)); len(errs) > 0 || meta["local-hostname"] != hostname {
			t.Fatalf("meta_data hostname %q (local-hostname %v) is not one a guest can take: %v", hostname, meta["local-hostname"], errs)
		}
		if h := spec.GetHostname(); h != "" && hostname != h {
			t.Fatalf("meta_data hostname %q, want the spec's %q", hostname, h)
		}
		var given struct {
			Meta map[string]string `json:"meta"`
		}
		if err := json.Unmarshal(secret.Data["meta_data"], &given); err != nil || !maps.Equal(given.Meta, spec.GetFirstBoot().GetMetaData()) {
			t.Fatalf("meta_data meta %v (%v), want the first-boot metadata %v", given.Meta, err, spec.GetFirstBoot().GetMetaData())
		}
		user, hasUser := secret.Data["user_data"]
		data := spec.GetFirstBoot().GetData()
		switch {
		case spec.GetFirstBoot().GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE || len(data) == 0:
			if hasUser {
				t.Fatalf("user_data written without first-boot data to write")
			}
		case !bytes.Equal(user, data) || !utf8.Valid(user) || len(user) > maxUserData:
			t.Fatalf("user_data of %d bytes (UTF-8: %v) is not the first-boot data of %d bytes", len(user), utf8.Valid(user), len(data))
		}

		h := claimed()
		if err := encodeRecord(h, &record{ID: id, Labels: labels, Generation: 1}, spec); err != nil {
			t.Fatalf("record of an accepted spec: %v", err)
		}
		rec, got, err := decodeRecord(h)
		if err != nil || rec == nil {
			t.Fatalf("reading the record back: %v, %v", rec, err)
		}
		// Fields this runtime does not know (a newer caller's) are not kept: it cannot act on them.
		want := &mriv1alpha1.MachineSpec{}
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(rawSpec, want); err != nil {
			t.Fatal(err)
		}
		if want.FirstBoot != nil {
			want.FirstBoot.Data = nil
		}
		if !proto.Equal(got, want) || rec.ID != id || rec.Labels[mri.LabelMachineUID] != uid {
			t.Fatalf("the record gives back %v (id %s), want %v (id %s)", got, rec.ID, want, id)
		}
	})
}
