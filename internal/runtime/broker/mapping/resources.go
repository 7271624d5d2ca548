package mapping

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
