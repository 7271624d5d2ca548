package mapping

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

var (
	genName  = rapid.StringMatching(`[a-z][a-z0-9]{0,6}`)
	genValue = rapid.StringMatching(`[a-z0-9]{0,8}`)
)

// genMachine draws an upstream machine the broker accepts: every field it carries, any
// value, no volume by handle.
func genMachine(t *rapid.T) *mriv1alpha1.Machine {
	labels := rapid.MapOf(genName, genValue).Draw(t, "labels")
	labels[mri.LabelMachineUID] = rapid.StringMatching(`[A-Za-z0-9/_-]{1,80}`).Draw(t, "uid")
	s := &mriv1alpha1.MachineSpec{
		Class:        genName.Draw(t, "class"),
		Resources:    &mriv1alpha1.Resources{MilliCpu: rapid.Int64Range(1, 1e6).Draw(t, "cpu"), MemoryBytes: rapid.Int64Range(1, 1e12).Draw(t, "mem")},
		Image:        &mriv1alpha1.Image{Reference: "registry.example/" + genName.Draw(t, "repo") + ":" + genName.Draw(t, "tag"), Digest: testDigest},
		Architecture: mriv1alpha1.Architecture(rapid.IntRange(1, 5).Draw(t, "arch")),
		Power:        mriv1alpha1.Power(rapid.IntRange(1, 2).Draw(t, "power")),
		Hostname:     rapid.StringMatching(`([a-z][a-z0-9]{0,10})?`).Draw(t, "hostname"),
		HostSelector: rapid.MapOf(genName, genValue).Draw(t, "hostSelector"),
	}
	if len(s.HostSelector) == 0 {
		s.HostSelector = nil
	}
	if rapid.Bool().Draw(t, "firstBoot") {
		s.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat(rapid.IntRange(1, 3).Draw(t, "format")),
			MetaData: rapid.MapOf(genName, genValue).Draw(t, "metaData")}
		if len(s.FirstBoot.MetaData) == 0 {
			s.FirstBoot.MetaData = nil
		}
		if s.FirstBoot.Format != mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE {
			s.FirstBoot.Data = []byte(genValue.Draw(t, "data"))
		}
		for i, n := range rapid.SliceOfNDistinct(genName, 0, 3, rapid.ID).Draw(t, "hwKeys") {
			s.FirstBoot.HardwareMetaData = append(s.FirstBoot.HardwareMetaData, &mriv1alpha1.HardwareMetaData{Key: "hw" + n,
				Field: mriv1alpha1.HardwareField(rapid.IntRange(1, 2).Draw(t, "field")), Name: "eth" + string(rune('0'+i))})
		}
	}
	for i, n := range rapid.SliceOfNDistinct(genName, 0, 4, rapid.ID).Draw(t, "volumes") {
		v := &mriv1alpha1.Volume{Name: n}
		if i == 0 && rapid.Bool().Draw(t, "root") {
			v.Source = &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: rapid.Int64Range(0, 1e12).Draw(t, "rootSize")}}
		} else {
			v.Source = &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: rapid.Int64Range(1, 1e12).Draw(t, "size")}}
		}
		s.Volumes = append(s.Volumes, v)
	}
	for _, n := range rapid.SliceOfNDistinct(genName, 0, 3, rapid.ID).Draw(t, "nics") {
		nic := &mriv1alpha1.NetworkInterface{Name: n, Network: genName.Draw(t, "network"), MacAddress: genValue.Draw(t, "mac")}
		if ips := rapid.SliceOfN(genValue, 0, 2).Draw(t, "ips"); len(ips) > 0 {
			nic.Ips = ips
		}
		s.NetworkInterfaces = append(s.NetworkInterfaces, nic)
	}
	for range rapid.IntRange(0, 2).Draw(t, "expressions") {
		s.HostSelectorExpressions = append(s.HostSelectorExpressions, &mriv1alpha1.LabelSelectorRequirement{
			Key: genName.Draw(t, "key"), Operator: rapid.SampledFrom([]string{"In", "NotIn", "Exists"}).Draw(t, "op")})
	}
	if rapid.Bool().Draw(t, "placement") {
		s.Placement = &mriv1alpha1.Placement{NativeOnly: rapid.Bool().Draw(t, "nativeOnly")}
		for range rapid.IntRange(0, 2).Draw(t, "tolerations") {
			s.Placement.Tolerations = append(s.Placement.Tolerations, &mriv1alpha1.Toleration{Key: genName.Draw(t, "tkey"),
				Operator: rapid.SampledFrom([]string{"Equal", "Exists"}).Draw(t, "top"), Value: genValue.Draw(t, "tval"),
				Effect: rapid.SampledFrom([]string{"NoSchedule", "NoExecute", ""}).Draw(t, "teffect")})
		}
	}
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Labels: labels}, Spec: s}
}

// TestRoundTripProperty: whatever the broker makes downstream of a machine reads back as
// that machine (R1): its labels, its spec with the first-boot data, generation 1, the
// downstream UID as id; and the downstream objects are named by the uid alone.
func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		up := genMachine(t)
		d, err := NewDownstream(testTarget, up)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := Name(up.Metadata.Labels)
		if d.Machine.Name != name || d.Machine.Labels[LabelUpstreamUID] != name || (d.Secret != nil && d.Secret.Name != name) {
			t.Fatalf("names %s, %v; want %s", d.Machine.Name, d.Secret, name)
		}
		dm := d.Machine.DeepCopy()
		dm.UID, dm.Generation = "down", 1
		var data map[string][]byte
		if d.Secret != nil {
			data = d.Secret.Data
		}
		got, err := Upstream(Observed{Machine: dm, SecretData: data})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got.Spec, up.Spec) {
			t.Fatalf("spec =\n%v\nwant\n%v", got.Spec, up.Spec)
		}
		if !proto.Equal(&mriv1alpha1.ObjectMetadata{Labels: got.Metadata.Labels}, &mriv1alpha1.ObjectMetadata{Labels: up.Metadata.Labels}) ||
			got.Metadata.Id != "down" || got.Metadata.Generation != 1 {
			t.Fatalf("metadata = %v", got.Metadata)
		}
	})
}
