package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Pool is the scheduler's view of one MachinePool.
type Pool struct {
	Name   string
	Labels map[string]string
	// Taints that keep Machines off (NoSchedule and NoExecute). PreferNoSchedule keeps
	// nothing off; it only ranks the pools that fit (see Schedule).
	Taints []corev1.Taint
	// Tenants is nil when every namespace may use the pool.
	Tenants       *Tenants
	Architectures ArchSet
	// Native are the architectures among those the pool runs natively, not emulated.
	Native ArchSet
	// Classes holds the index (Class.Index) of each supported MachineClass.
	Classes     Bitset
	Allocatable Resources
	// Ready is the pool's Ready condition; HeartbeatExpiry is when its Lease runs out.
	Ready           bool
	HeartbeatExpiry time.Time
	// Reported: the pool's MachinePool has a Ready condition, its poollet's first report
	// of its runtime.
	Reported bool
	// StartingUntil is when a pool that has not reported yet, whose Lease was never
	// renewed, or that offers nothing yet (no allocatable cpu or memory: a bare-metal pool
	// whose servers are still being enrolled and inspected) stops counting as starting
	// (Starting): until then what it will take is not known, and a Machine it turns down
	// waits for it rather than being told it cannot be placed. A pool nobody runs, or
	// that stays empty, is starting only for a while.
	StartingUntil time.Time

	// used is the sum of the demands of the Machines counted against this pool. Only the
	// Cache changes it.
	used Resources
}

// Starting reports whether the pool is starting at now: its poollet has not reported, or
// not renewed its Lease, yet, or it offers nothing yet, and StartingUntil has not passed.
func (p *Pool) Starting(now time.Time) bool {
	empty := p.Allocatable.MilliCPU == 0 && p.Allocatable.Memory == 0
	return now.Before(p.StartingUntil) && (!p.Reported || p.HeartbeatExpiry.IsZero() || empty)
}

// Free is what is left of the pool's allocatable after the Machines counted against it.
func (p *Pool) Free() Resources {
	free := Resources{MilliCPU: p.Allocatable.MilliCPU - p.used.MilliCPU, Memory: p.Allocatable.Memory - p.used.Memory}
	if len(p.Allocatable.Extended) > 0 || len(p.used.Extended) > 0 {
		free.Extended = map[corev1.ResourceName]int64{}
		for k, v := range p.Allocatable.Extended {
			free.Extended[k] = v
		}
		for k, v := range p.used.Extended {
			free.Extended[k] -= v
		}
	}
	return free
}

// copy returns p with its own resource maps, safe to read after the cache's lock is released.
func (p *Pool) copy() Pool {
	c := *p
	c.Allocatable = p.Allocatable.Clone()
	c.used = p.used.Clone()
	return c
}

// Used is the sum of the demands counted against the pool.
func (p *Pool) Used() Resources { return p.used }

// Tenants is a pool's tenant policy: a namespace is allowed when it is named or its labels
// match the selector.
type Tenants struct {
	Namespaces map[string]struct{}
	// Selector is nil when only Namespaces allow.
	Selector labels.Selector
}

// TenantsFrom converts a pool's tenant policy; nil (every namespace) when it names none.
// An invalid selector allows nobody rather than everybody.
func TenantsFrom(t *computev1alpha1.TenantPolicy) *Tenants {
	if t == nil || (len(t.Namespaces) == 0 && t.NamespaceSelector == nil) {
		return nil
	}
	out := &Tenants{Namespaces: map[string]struct{}{}}
	for _, ns := range t.Namespaces {
		out.Namespaces[ns] = struct{}{}
	}
	if t.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		out.Selector = sel
	}
	return out
}

// NeedsLabels reports whether Allows reads the namespace's labels.
func (t *Tenants) NeedsLabels() bool { return t != nil && t.Selector != nil }

// Allows reports whether the namespace ns with labels nsLabels may use the pool.
func (t *Tenants) Allows(ns string, nsLabels labels.Set) bool {
	if t == nil {
		return true
	}
	if _, ok := t.Namespaces[ns]; ok {
		return true
	}
	return t.Selector != nil && t.Selector.Matches(nsLabels)
}

// Class is the scheduler's view of a MachineClass.
type Class struct {
	Name string
	// Index is the class's bit in Pool.Classes; the Cache assigns it.
	Index  int
	Demand Resources
	// Architectures the class is offered on.
	Architectures ArchSet
}

// Request is one Machine to place.
type Request struct {
	Namespace       string
	NamespaceLabels labels.Set
	Class           *Class
	// Architectures the Machine may run: its own pin, the image's index and the class,
	// intersected by the caller.
	Architectures ArchSet
	// NativeOnly keeps the Machine off pools that would emulate its architecture.
	NativeOnly   bool
	PoolSelector map[string]string
	Tolerations  []corev1.Toleration
	// ExcludedUntil holds pools whose runtime refused this Machine, until when.
	ExcludedUntil map[string]time.Time
}

// Bitset is a set of small non-negative integers.
type Bitset []uint64

// Has reports whether i is in b.
func (b Bitset) Has(i int) bool {
	w := i / 64
	return i >= 0 && w < len(b) && b[w]&(1<<(uint(i)%64)) != 0
}

// With returns b with i added.
func (b Bitset) With(i int) Bitset {
	for len(b) <= i/64 {
		b = append(b, 0)
	}
	b[i/64] |= 1 << (uint(i) % 64)
	return b
}
