package mapping

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// resourcesToMRI is list as the MRI counts it (cpu in millicores, memory in bytes).
// TODO(lead): internal/poollet.ResourcesToMRI is the same; it belongs in internal/mri,
// where the broker (which may not import the poollet) can share it.
func resourcesToMRI(list corev1.ResourceList) *mriv1alpha1.Resources {
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

// resourcesFromMRI is the reverse: what a machine of spec.resources asks for.
func resourcesFromMRI(r *mriv1alpha1.Resources) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(r.GetMilliCpu(), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.GetMemoryBytes(), resource.BinarySI),
	}
	for k, v := range r.GetExtended() {
		out[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return out
}

// add adds b to a, in place.
func add(a, b corev1.ResourceList) {
	for k, q := range b {
		sum := a[k]
		sum.Add(q)
		a[k] = sum
	}
}

// sub subtracts b from a, in place, never below zero: a pool that says it holds more
// than it has offers nothing, not a negative amount that would cancel another pool's.
func sub(a, b corev1.ResourceList) {
	for k, q := range b {
		d, ok := a[k]
		if !ok {
			continue
		}
		d.Sub(q)
		if d.Sign() < 0 {
			d = *resource.NewQuantity(0, d.Format)
		}
		a[k] = d
	}
}
