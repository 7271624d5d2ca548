package mapping

import (
	"maps"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Change is what an MRI call asks of a machine: its spec and labels after the call, and
// a reboot token ("" for none).
type Change struct {
	Spec   *mriv1alpha1.MachineSpec
	Labels map[string]string
	Reboot string
}

// Update is the downstream Machine after an MRI call changed the machine from current (its
// spec as Upstream reported it, first-boot data included) as c says: only the fields a
// bound downstream Machine may change move (power, image, first-boot references and
// metadata), a new reboot token becomes its compute.anvil.dev/reboot annotation; the
// record's MRI generation grows when the spec changed or a reboot was asked (E4), its
// downstream generation when the downstream spec changed (the API server counts the same
// way). dm is not modified.
func Update(t Target, dm *computev1alpha1.Machine, current *mriv1alpha1.MachineSpec, c Change) (*computev1alpha1.Machine, error) {
	spec, labels := c.Spec, c.Labels
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
	rebooted := c.Reboot != "" && dm.Annotations[computev1alpha1.AnnotationReboot] != c.Reboot
	if rebooted {
		out.Annotations[computev1alpha1.AnnotationReboot] = c.Reboot
	}
	if rebooted || !proto.Equal(current, spec) {
		rec.Generation++
	}
	rec.Labels = maps.Clone(labels)
	if err := SetRecord(out, rec, spec); err != nil {
		return nil, err
	}
	return out, nil
}
