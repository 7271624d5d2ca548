package mapping

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestUpdate(t *testing.T) {
	newDigest := "sha256:" + "ab" + testDigest[9:]
	for _, tc := range []struct {
		name         string
		change       func(*mriv1alpha1.MachineSpec, map[string]string, *string)
		gen, downGen int64
		check        func(*testing.T, *computev1alpha1.Machine)
	}{
		{"nothing changes: nothing counts", func(*mriv1alpha1.MachineSpec, map[string]string, *string) {}, 1, 1, nil},
		{"labels only: no generation", func(_ *mriv1alpha1.MachineSpec, l map[string]string, _ *string) { l["team"] = "b" }, 1, 1, nil},
		{"power: both generations", func(s *mriv1alpha1.MachineSpec, _ map[string]string, _ *string) {
			s.Power = mriv1alpha1.Power_POWER_OFF
		}, 2, 2,
			func(t *testing.T, m *computev1alpha1.Machine) {
				if m.Spec.Power != computev1alpha1.PowerOff {
					t.Fatal(m.Spec.Power)
				}
			}},
		{"reimage: the image moves, pinned", func(s *mriv1alpha1.MachineSpec, _ map[string]string, _ *string) {
			s.Image = &mriv1alpha1.Image{Reference: "registry.example/os/debian:13", Digest: newDigest}
		}, 2, 2, func(t *testing.T, m *computev1alpha1.Machine) {
			if m.Spec.Image != "registry.example/os/debian@"+newDigest {
				t.Fatal(m.Spec.Image)
			}
		}},
		{"first-boot data only: the MRI generation, the Secret's change, not the Machine's", func(s *mriv1alpha1.MachineSpec, _ map[string]string, _ *string) {
			s.FirstBoot.Data = []byte("#cloud-config\nusers: []\n")
		}, 2, 1, nil},
		{"a reboot: the MRI generation and the annotation, not the Machine's spec", func(_ *mriv1alpha1.MachineSpec, _ map[string]string, r *string) { *r = "r1" }, 2, 1,
			func(t *testing.T, m *computev1alpha1.Machine) {
				if m.Annotations[computev1alpha1.AnnotationReboot] != "r1" {
					t.Fatal(m.Annotations)
				}
			}},
		{"the reboot already asked: nothing", func(_ *mriv1alpha1.MachineSpec, _ map[string]string, r *string) { *r = "r0" }, 1, 1, nil},
		{"first-boot format: the references move", func(s *mriv1alpha1.MachineSpec, _ map[string]string, _ *string) {
			s.FirstBoot.Format = mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION
		}, 2, 2, func(t *testing.T, m *computev1alpha1.Machine) {
			if m.Spec.IgnitionRef == nil || m.Spec.UserDataRef != nil {
				t.Fatal(m.Spec)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := machine()
			_, dm := created(t, up)
			spec := proto.Clone(up.Spec).(*mriv1alpha1.MachineSpec)
			labels := maps.Clone(up.Metadata.Labels)
			dm.Annotations[computev1alpha1.AnnotationReboot] = "r0"
			reboot := ""
			tc.change(spec, labels, &reboot)
			out, err := Update(testTarget, dm, up.Spec, Change{Spec: spec, Labels: labels, Reboot: reboot})
			if err != nil {
				t.Fatal(err)
			}
			rec, stored, err := DecodeRecord(out.Annotations[AnnotationRecord])
			if err != nil {
				t.Fatal(err)
			}
			if rec.Generation != tc.gen || rec.DownstreamGeneration != tc.downGen || !maps.Equal(rec.Labels, labels) {
				t.Fatalf("record = %+v, want generation %d, downstream %d, labels %v", rec, tc.gen, tc.downGen, labels)
			}
			want := proto.Clone(spec).(*mriv1alpha1.MachineSpec)
			want.FirstBoot.Data = nil
			if !proto.Equal(stored, want) {
				t.Fatalf("stored spec = %v", stored)
			}
			if out.Spec.Volumes[1].Ephemeral == nil || dm.Annotations[AnnotationRecord] == out.Annotations[AnnotationRecord] && tc.gen != 1 {
				t.Fatal("Update changed what it may not, or wrote no record")
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}
