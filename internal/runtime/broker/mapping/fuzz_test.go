package mapping

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// FuzzNewDownstream: no machine a caller can send, valid or not, panics the mapping; what
// it maps reads back with the same spec.
func FuzzNewDownstream(f *testing.F) {
	for _, m := range []*mriv1alpha1.Machine{machine(), {}, {Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{"anvil.dev/machine-uid": "x"}}}} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &mriv1alpha1.Machine{}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		d, err := NewDownstream(testTarget, m)
		if err != nil {
			return
		}
		dm := d.Machine.DeepCopy()
		dm.UID, dm.Generation = "down", 1
		var data map[string][]byte
		if d.Secret != nil {
			data = d.Secret.Data
		}
		up, err := Upstream(Observed{Machine: dm, SecretData: data})
		if err != nil {
			t.Fatalf("a machine mapped down does not read back: %v", err)
		}
		want := proto.Clone(m.GetSpec()).(*mriv1alpha1.MachineSpec)
		if want == nil {
			want = &mriv1alpha1.MachineSpec{}
		}
		// Unknown fields (of a newer caller) are not kept: the record is protobuf JSON.
		dropUnknown(want.ProtoReflect())
		if d.Secret == nil && want.FirstBoot != nil {
			want.FirstBoot.Data = nil // format NONE (or none at all): no data to keep
		}
		if !proto.Equal(up.Spec, want) {
			t.Fatalf("spec read back =\n%v\nwant\n%v", up.Spec, want)
		}
	})
}

// dropUnknown clears the unknown fields of m and of every message in it.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		case fd.IsMap():
		case fd.Message() != nil:
			dropUnknown(v.Message())
		}
		return true
	})
}
