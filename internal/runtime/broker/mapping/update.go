package mapping

import (
	"maps"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Update is the downstream Machine after an MRI call changed the spec from current (as
// Upstream reported it, first-boot data included) to spec and the labels to labels (power, reimage, labels): only the fields a bound downstream Machine
// may change move (power, image, first-boot references and metadata); the record's MRI
// generation grows when the spec changed (E4), its downstream generation when the
// downstream spec did (the API server counts the same way). dm is not modified.
func Update(t Target, dm *computev1alpha1.Machine, current, spec *mriv1alpha1.MachineSpec, labels map[string]string) (*computev1alpha1.Machine, error) {
	rec, _, err := DecodeRecord(dm.Annotations[AnnotationRecord])
	if err != nil {
		return nil, err
	}
	want, err := MachineSpec(t, dm.Name, spec)
	if err != nil {
		return nil, err
	}
	out := dm.DeepCopy()
	out.Spec.Power = want.Power
	out.Spec.Image = want.Image
	out.Spec.IgnitionRef, out.Spec.UserDataRef = want.IgnitionRef, want.UserDataRef
	out.Spec.MetaData, out.Spec.HardwareMetaData = want.MetaData, want.HardwareMetaData
	if !equality.Semantic.DeepEqual(out.Spec, dm.Spec) {
		rec.DownstreamGeneration = dm.Generation + 1
	}
	if !proto.Equal(current, spec) {
		rec.Generation++
	}
	rec.Labels = maps.Clone(labels)
	if err := SetRecord(out, rec, spec); err != nil {
		return nil, err
	}
	return out, nil
}
