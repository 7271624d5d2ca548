package mri

import (
	corev1 "k8s.io/api/core/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// PlacementToMRI is a Machine's placement rules as a runtime spec carries them
// (spec.placement, contract P1): its tolerations and whether it forbids emulation. A
// Machine with neither gets nil, as runtime machines made before the field existed have.
// Tolerations are copied as written, operators and effects included, so a broker's
// downstream scheduler matches them exactly as the caller's did; tolerationSeconds has no
// place in the MRI and is dropped (no anvil scheduler evicts, so it decides nothing).
func PlacementToMRI(tolerations []corev1.Toleration, emulation computev1alpha1.Emulation) *mriv1alpha1.Placement {
	nativeOnly := emulation == computev1alpha1.EmulationForbidden
	if len(tolerations) == 0 && !nativeOnly {
		return nil
	}
	p := &mriv1alpha1.Placement{NativeOnly: nativeOnly}
	for _, t := range tolerations {
		p.Tolerations = append(p.Tolerations, &mriv1alpha1.Toleration{
			Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect)})
	}
	return p
}

// PlacementFromMRI is the reverse, for a runtime that makes Machines of its own (the
// broker): the tolerations and emulation of a Machine placed by the same rules. No
// placement means no tolerations and emulation Allowed (the API's default).
func PlacementFromMRI(p *mriv1alpha1.Placement) ([]corev1.Toleration, computev1alpha1.Emulation) {
	var out []corev1.Toleration
	for _, t := range p.GetTolerations() {
		out = append(out, corev1.Toleration{Key: t.GetKey(), Operator: corev1.TolerationOperator(t.GetOperator()),
			Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
	}
	if p.GetNativeOnly() {
		return out, computev1alpha1.EmulationForbidden
	}
	return out, computev1alpha1.EmulationAllowed
}
