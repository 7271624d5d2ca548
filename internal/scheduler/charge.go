package scheduler

import (
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Charge names the pool a Machine is counted against and the class whose demand it holds
// there: from the moment its spec names a pool until it is Terminated or gone. A Machine
// being deleted still holds its share, since its runtime machine lasts until the poollet
// lets the object go. ok is false for a Machine that holds nothing. The Cache charges by
// this rule, and a poollet counts its pool's MachinePool status.allocated by it, so the
// two agree on what a pool holds.
func Charge(m *computev1alpha1.Machine) (pool, class string, ok bool) {
	if m.Spec.MachinePoolRef == nil || m.Status.State == computev1alpha1.MachineStateTerminated {
		return "", "", false
	}
	return m.Spec.MachinePoolRef.Name, m.Spec.MachineClassRef.Name, true
}

// Allocated is what the Machines charged to pool hold of it: the sum of their classes'
// demands, classes by name. A Machine whose class does not exist holds nothing until it
// does, as in the Cache. Unlike the Cache, which keeps the demand a Machine was charged
// with, it reads each class's demand as it is now: it is recounted from scratch each time.
func Allocated(pool string, machines []computev1alpha1.Machine, classes map[string]Resources) Resources {
	var sum Resources
	for i := range machines {
		if p, class, ok := Charge(&machines[i]); ok && p == pool {
			if demand, known := classes[class]; known {
				sum.Add(demand)
			}
		}
	}
	return sum
}
