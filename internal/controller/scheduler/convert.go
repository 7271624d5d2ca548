package scheduler

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// PoolStartGrace is how long after its creation a MachinePool that has not reported yet,
// or offers nothing yet, counts as starting (scheduler.Pool.Starting): a poollet's first
// report and Lease take a runtime's first answer, seconds, and a bare-metal pool's first
// servers about a minute of enrolment and inspection; a MachinePool made by hand that no
// poollet runs stops holding back Warnings after it.
const PoolStartGrace = 2 * time.Minute

// poolFrom converts a MachinePool; classIndex maps class names to their bit.
func poolFrom(mp *computev1alpha1.MachinePool, classIndex func(string) int) scheduler.Pool {
	p := scheduler.Pool{
		Name:          mp.Name,
		Labels:        mp.Labels,
		Taints:        mp.Spec.Taints,
		Architectures: scheduler.ArchSetOf(mp.Status.Architectures...),
		Native:        scheduler.ArchSetOf(mp.Status.NativeArchitectures()...),
		Allocatable:   scheduler.ResourcesFrom(mp.Status.Allocatable),
		Ready:         meta.IsStatusConditionTrue(mp.Status.Conditions, computev1alpha1.ConditionReady),
		Reported:      meta.FindStatusCondition(mp.Status.Conditions, computev1alpha1.ConditionReady) != nil,
		StartingUntil: mp.CreationTimestamp.Add(PoolStartGrace),
	}
	for _, c := range mp.Status.SupportedClasses {
		p.Classes = p.Classes.With(classIndex(c))
	}
	p.Tenants = scheduler.TenantsFrom(mp.Spec.Tenants)
	return p
}

// leaseExpiry is when a pool's heartbeat Lease runs out; zero when it was never renewed.
func leaseExpiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// classArchitectures is the class's architecture, or every one when it names none.
func classArchitectures(mc *computev1alpha1.MachineClass) scheduler.ArchSet {
	if mc.Architecture == "" {
		return scheduler.AnyArch
	}
	return scheduler.ArchSetOf(mc.Architecture)
}

// schedulerResources is what one Machine of the class takes from a pool.
func schedulerResources(mc *computev1alpha1.MachineClass) scheduler.Resources {
	return scheduler.ResourcesFrom(mc.Capabilities)
}
