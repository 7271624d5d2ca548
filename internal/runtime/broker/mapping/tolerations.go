package mapping

import (
	corev1 "k8s.io/api/core/v1"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// TODO(lead): use internal/mri's once merged.
func tolerationsFromMRI(in []*mriv1alpha1.Toleration) []corev1.Toleration {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Toleration, 0, len(in))
	for _, t := range in {
		out = append(out, corev1.Toleration{Key: t.GetKey(), Operator: corev1.TolerationOperator(t.GetOperator()),
			Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
	}
	return out
}
