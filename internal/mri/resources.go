package mri

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// ResourcesToMRI is a ResourceList as the MRI counts it: cpu in millicores, memory in
// bytes, the rest by name. One conversion for the poollet and every runtime.
func ResourcesToMRI(list corev1.ResourceList) *mriv1alpha1.Resources {
	r := &mriv1alpha1.Resources{}
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCpu = q.MilliValue()
		case corev1.ResourceMemory:
			r.MemoryBytes = q.Value()
		default:
			if r.Extended == nil {
				r.Extended = map[string]int64{}
			}
			r.Extended[string(name)] = q.Value()
		}
	}
	return r
}

// ResourcesFromMRI is the reverse; cpu and memory are always set.
func ResourcesFromMRI(r *mriv1alpha1.Resources) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(r.GetMilliCpu(), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.GetMemoryBytes(), resource.BinarySI),
	}
	for k, v := range r.GetExtended() {
		out[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return out
}
