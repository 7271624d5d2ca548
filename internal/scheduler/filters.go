package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Reason is why a filter turned a pool down. The zero value means the pool passed.
type Reason struct {
	Code ReasonCode
	// Resource names what is insufficient, for ReasonInsufficient.
	Resource corev1.ResourceName
	// Taint is the untolerated taint, for ReasonTaint. A pointer into the pool, so a
	// refusal allocates nothing; the text is built only when a summary is wanted.
	Taint *corev1.Taint
}

// ReasonCode names one filter's refusal.
type ReasonCode uint8

const (
	ReasonNone ReasonCode = iota
	ReasonNotReady
	ReasonHeartbeatExpired
	ReasonRefusedRecently
	ReasonArchitecture
	ReasonEmulated
	ReasonClassUnsupported
	ReasonPoolSelector
	ReasonTenancy
	ReasonTaint
	ReasonInsufficient
)

// String is the text used in a Machine's Scheduled condition.
func (r Reason) String() string {
	switch r.Code {
	case ReasonNone:
		return "fits"
	case ReasonNotReady:
		return "pool not Ready"
	case ReasonHeartbeatExpired:
		return "pool heartbeat expired"
	case ReasonRefusedRecently:
		return "runtime refused this Machine recently"
	case ReasonArchitecture:
		return "no matching architecture"
	case ReasonEmulated:
		return "runs the architecture only emulated, and the Machine forbids emulation"
	case ReasonClassUnsupported:
		return "MachineClass not supported"
	case ReasonPoolSelector:
		return "machinePoolSelector does not match"
	case ReasonTenancy:
		return "namespace not allowed by the pool's tenant policy"
	case ReasonTaint:
		if r.Taint == nil {
			return "untolerated taint"
		}
		return "untolerated taint " + taintText(r.Taint)
	case ReasonInsufficient:
		return "insufficient " + string(r.Resource)
	}
	return "unknown reason"
}

// Each filter below checks one thing and returns the reason it refuses, or the zero Reason.
// They run cheapest first; the first refusal is the one reported for a pool.

func filterReady(p *Pool, _ *Request, now time.Time) Reason {
	if !p.Ready {
		return Reason{Code: ReasonNotReady}
	}
	if !now.Before(p.HeartbeatExpiry) {
		return Reason{Code: ReasonHeartbeatExpired}
	}
	return Reason{}
}

func filterExcluded(p *Pool, r *Request, now time.Time) Reason {
	if until, ok := r.ExcludedUntil[p.Name]; ok && now.Before(until) {
		return Reason{Code: ReasonRefusedRecently}
	}
	return Reason{}
}

func filterArchitecture(p *Pool, r *Request, _ time.Time) Reason {
	if p.Architectures&r.Architectures == 0 {
		return Reason{Code: ReasonArchitecture}
	}
	if r.NativeOnly && p.Native&r.Architectures == 0 {
		return Reason{Code: ReasonEmulated}
	}
	return Reason{}
}

func filterClass(p *Pool, r *Request, _ time.Time) Reason {
	if !p.Classes.Has(r.Class.Index) {
		return Reason{Code: ReasonClassUnsupported}
	}
	return Reason{}
}

func filterPoolSelector(p *Pool, r *Request, _ time.Time) Reason {
	for k, v := range r.PoolSelector {
		if have, ok := p.Labels[k]; !ok || have != v {
			return Reason{Code: ReasonPoolSelector}
		}
	}
	return Reason{}
}

func filterTenancy(p *Pool, r *Request, _ time.Time) Reason {
	if !p.Tenants.Allows(r.Namespace, r.NamespaceLabels) {
		return Reason{Code: ReasonTenancy}
	}
	return Reason{}
}

func filterTaints(p *Pool, r *Request, _ time.Time) Reason {
	for i := range p.Taints {
		t := &p.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue // a preference, scored by Schedule
		}
		if !tolerated(t, r.Tolerations) {
			return Reason{Code: ReasonTaint, Taint: t}
		}
	}
	return Reason{}
}

func filterResources(p *Pool, r *Request, _ time.Time) Reason {
	d := &r.Class.Demand
	// The common case, without building Free's map.
	if d.MilliCPU > p.Allocatable.MilliCPU-p.used.MilliCPU {
		return Reason{Code: ReasonInsufficient, Resource: corev1.ResourceCPU}
	}
	if d.Memory > p.Allocatable.Memory-p.used.Memory {
		return Reason{Code: ReasonInsufficient, Resource: corev1.ResourceMemory}
	}
	for name, v := range d.Extended {
		if v > p.Allocatable.Extended[name]-p.used.Extended[name] {
			return Reason{Code: ReasonInsufficient, Resource: name}
		}
	}
	return Reason{}
}

// Admits runs the filters of what a pool's owners decided, whatever its capacity: its
// tenant policy and its taints. A poollet runs them again before it creates a runtime
// machine, so a binding made without the scheduler (by a holder of the bind verb) or
// before the pool's policy changed does not skip them.
func Admits(p *Pool, r *Request) Reason {
	if x := filterTenancy(p, r, time.Time{}); x.Code != ReasonNone {
		return x
	}
	return filterTaints(p, r, time.Time{})
}

// Fits runs every filter, cheapest first, and returns the first refusal or the zero
// Reason. The calls are written out rather than looped over a slice of funcs so the
// compiler can inline the small filters: this is the inner loop of every decision.
func Fits(p *Pool, r *Request, now time.Time) Reason {
	if x := filterReady(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterExcluded(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterArchitecture(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterClass(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterPoolSelector(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterTenancy(p, r, now); x.Code != ReasonNone {
		return x
	}
	if x := filterTaints(p, r, now); x.Code != ReasonNone {
		return x
	}
	return filterResources(p, r, now)
}

// tolerated reports whether one of tols tolerates t. Operators are Equal (the default)
// and Exists; an empty key with Exists tolerates every taint.
func tolerated(t *corev1.Taint, tols []corev1.Toleration) bool {
	for i := range tols {
		tol := &tols[i]
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if tol.Key != "" && tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

func taintText(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
