package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is an amount of cpu (in millicores), memory (in bytes) and extended resources
// (in whole units). cpu and memory are fields, not map entries, because every decision
// reads them and map lookups would dominate the time of a decision.
type Resources struct {
	MilliCPU int64
	Memory   int64
	// Extended is nil when there are none, which is the common case.
	Extended map[corev1.ResourceName]int64
}

// ResourcesFrom converts a ResourceList. Unknown names count as extended resources.
func ResourcesFrom(list corev1.ResourceList) Resources {
	var r Resources
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		default:
			if r.Extended == nil {
				r.Extended = map[corev1.ResourceName]int64{}
			}
			r.Extended[name] = q.Value()
		}
	}
	return r
}

// List is r as a ResourceList, the reverse of ResourcesFrom: cpu and memory always (zero
// included), extended resources when not zero.
func (r Resources) List() corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.Memory, resource.BinarySI),
	}
	for name, v := range r.Extended {
		if v != 0 {
			out[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// Clone returns a copy of r that shares no map with it.
func (r Resources) Clone() Resources {
	c := r
	if r.Extended != nil {
		c.Extended = make(map[corev1.ResourceName]int64, len(r.Extended))
		for k, v := range r.Extended {
			c.Extended[k] = v
		}
	}
	return c
}

// Add adds o to r.
func (r *Resources) Add(o Resources) { r.addScaled(o, 1) }

// Sub subtracts o from r.
func (r *Resources) Sub(o Resources) { r.addScaled(o, -1) }

func (r *Resources) addScaled(o Resources, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	for name, v := range o.Extended {
		if r.Extended == nil {
			r.Extended = map[corev1.ResourceName]int64{}
		}
		r.Extended[name] += sign * v
		if r.Extended[name] == 0 {
			delete(r.Extended, name)
		}
	}
}

// shortfall returns the first resource of demand that free cannot cover, or "" when
// demand fits.
func shortfall(demand, free Resources) corev1.ResourceName {
	if demand.MilliCPU > free.MilliCPU {
		return corev1.ResourceCPU
	}
	if demand.Memory > free.Memory {
		return corev1.ResourceMemory
	}
	for name, v := range demand.Extended {
		if v > free.Extended[name] {
			return name
		}
	}
	return ""
}
