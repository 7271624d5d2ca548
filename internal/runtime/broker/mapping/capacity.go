package mapping

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// Site is what the broker reads downstream to account capacity.
type Site struct {
	Pools   []computev1alpha1.MachinePool
	Classes []computev1alpha1.MachineClass
	// Machines are the broker's own downstream Machines (LabelPool), any state.
	Machines []computev1alpha1.Machine
	// Selector picks the pools the broker may use (--pool-selector); nil means every pool.
	Selector labels.Selector
}

// share is one usable pool and what of it belongs to this broker: what is free plus what
// the broker's own Machines bound to it hold.
type share struct {
	pool *computev1alpha1.MachinePool
	res  corev1.ResourceList
}

// shares are the pools the broker may use: Ready and selected. A pool's allocatable is
// not reduced by its Machines (the scheduler subtracts them); status.allocated is what
// they hold. Only what others' Machines hold is subtracted: the upstream scheduler
// subtracts the broker's own itself, and reporting only the free part would count them
// twice.
func (s Site) shares() []share {
	var out []share
	for i := range s.Pools {
		p := &s.Pools[i]
		if !meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) ||
			(s.Selector != nil && !s.Selector.Matches(labels.Set(p.Labels))) {
			continue
		}
		// What others hold is allocated less the broker's own, each floored at zero: a pool
		// others fill past its allocatable gives nothing, however many of the broker's
		// machines it also holds, so binding one never makes room.
		others := p.Status.Allocated.DeepCopy()
		for j := range s.Machines {
			m := &s.Machines[j]
			if pool, _, ok := scheduler.Charge(m); ok && pool == p.Name {
				sub(others, s.demand(m))
			}
		}
		res := p.Status.Allocatable.DeepCopy()
		sub(res, others)
		out = append(out, share{pool: p, res: res})
	}
	return out
}

// holds reports whether one of the broker's Machines counts against what it admits: every
// one not Terminated, bound or not yet (scheduler.Charge counts only bound ones, as the
// downstream poollet's status.allocated does).
func holds(m *computev1alpha1.Machine) bool {
	return m.Status.State != computev1alpha1.MachineStateTerminated
}

// demand is what a Machine of the broker asks for: its class's capabilities (none for a
// class that is gone; the downstream poollet cannot count it either).
func (s Site) demand(m *computev1alpha1.Machine) corev1.ResourceList {
	for i := range s.Classes {
		if s.Classes[i].Name == m.Spec.MachineClassRef.Name {
			return s.Classes[i].Capabilities
		}
	}
	return nil
}

// Status is the broker's StatusResponse: capacity and allocatable summed over the usable
// pools, their architectures (native ones apart), and the classes they support that exist.
func (s Site) Status() *mriv1alpha1.StatusResponse {
	capacity, alloc := corev1.ResourceList{}, corev1.ResourceList{}
	archs, native := map[computev1alpha1.Architecture]bool{}, map[computev1alpha1.Architecture]bool{}
	classes := map[string]bool{}
	for _, sh := range s.shares() {
		add(capacity, sh.pool.Status.Capacity)
		add(alloc, sh.res)
		for _, a := range sh.pool.Status.Architectures {
			archs[a] = true
		}
		for _, a := range sh.pool.Status.NativeArchitectures() {
			native[a] = true
		}
		for _, c := range sh.pool.Status.SupportedClasses {
			classes[c] = true
		}
	}
	out := &mriv1alpha1.StatusResponse{Capacity: mri.ResourcesToMRI(capacity), Allocatable: mri.ResourcesToMRI(alloc)}
	for _, a := range computev1alpha1.KnownArchitectures {
		if archs[a] {
			out.Architectures = append(out.Architectures, mri.ArchToMRI(a))
		}
		if native[a] {
			out.NativeArchitectures = append(out.NativeArchitectures, mri.ArchToMRI(a))
		}
	}
	for _, c := range s.Classes {
		if classes[c.Name] {
			out.SupportedClasses = append(out.SupportedClasses, c.Name)
		}
	}
	sort.Strings(out.SupportedClasses)
	return out
}

// RefusalReason says why a create does not fit.
type RefusalReason string

const (
	// RefusedNoCapacity: the usable pools of the architecture hold too little (NO_CAPACITY).
	RefusedNoCapacity RefusalReason = "NoCapacity"
	// RefusedArchitecture: no usable pool runs the architecture (WRONG_ARCHITECTURE).
	RefusedArchitecture RefusalReason = "WrongArchitecture"
)

// Refusal is a create that does not fit, with the reason and a message naming why.
type Refusal struct {
	Reason  RefusalReason
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Admit is the create-time admission (CONTRACT.md E5) of a machine of arch asking for
// demand: what the broker's Machines of arch hold plus demand fits in the shares of the
// usable pools that run arch (natively, when nativeOnly), and everything the broker's
// Machines hold plus demand fits in all the shares. nil when it fits.
func (s Site) Admit(arch computev1alpha1.Architecture, nativeOnly bool, demand corev1.ResourceList) *Refusal {
	shares := s.shares()
	archFree, allFree := corev1.ResourceList{}, corev1.ResourceList{}
	runs := false
	for _, sh := range shares {
		add(allFree, sh.res)
		list := sh.pool.Status.Architectures
		if nativeOnly {
			list = sh.pool.Status.NativeArchitectures()
		}
		if slices.Contains(list, arch) {
			runs = true
			add(archFree, sh.res)
		}
	}
	if !runs {
		how := ""
		if nativeOnly {
			how = " natively"
		}
		return &Refusal{Reason: RefusedArchitecture, Message: fmt.Sprintf(
			"no downstream pool this broker may use (%d Ready and selected) runs %s%s", len(shares), arch, how)}
	}
	archHeld, allHeld := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range s.Machines {
		m := &s.Machines[i]
		if !holds(m) {
			continue
		}
		add(allHeld, s.demand(m))
		if m.Spec.Architecture == arch {
			add(archHeld, s.demand(m))
		}
	}
	if short := shortOf(archHeld, demand, archFree); short != "" {
		return &Refusal{Reason: RefusedNoCapacity, Message: fmt.Sprintf("the downstream pools running %s lack %s", arch, short)}
	}
	if short := shortOf(allHeld, demand, allFree); short != "" {
		return &Refusal{Reason: RefusedNoCapacity, Message: "the downstream pools lack " + short}
	}
	return nil
}

// shortOf names each resource of demand that held+demand exceeds in free, "" when none.
func shortOf(held, demand, free corev1.ResourceList) string {
	var short []string
	for name, q := range demand {
		need := held[name]
		need.Add(q)
		have := free[name]
		if need.Cmp(have) > 0 {
			short = append(short, fmt.Sprintf("%s (%s needed with the broker's machines, %s usable)", name, need.String(), have.String()))
		}
	}
	sort.Strings(short)
	return strings.Join(short, ", ")
}

// Demand is what an upstream machine asks for, from its spec.resources.
func Demand(s *mriv1alpha1.MachineSpec) corev1.ResourceList {
	return mri.ResourcesFromMRI(s.GetResources())
}
