package networkaccess

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// Code says why a NIC may not join a network; CodeNone (the zero value) allows it.
type Code int

const (
	CodeNone Code = iota
	// CodeUndeclared: the runtime gives the network something and the pool's spec.networks
	// has no entry for it, so nobody may join it.
	CodeUndeclared
	// CodeBuildersOnly: the network is open to image builders, not to this namespace.
	CodeBuildersOnly
	// CodeNotATenant: the network's entry does not allow this namespace.
	CodeNotATenant
)

// Pool is what the decision knows of one pool.
type Pool struct {
	Name string
	// Rules are spec.networks by name.
	Rules map[string]Rule
	// Served are the networks the runtime gives something (a forward or outbound access).
	Served map[string]bool
}

// Rule is one spec.networks entry.
type Rule struct {
	// Tenants is nil when no namespace is allowed.
	Tenants  *scheduler.Tenants
	Builders bool
}

// PoolFrom converts a MachinePool's spec.networks and the networks its runtime serves
// (from MRI Status, or status.networks).
func PoolFrom(name string, spec []computev1alpha1.NetworkAccess, served []computev1alpha1.PoolNetwork) *Pool {
	p := &Pool{Name: name, Rules: make(map[string]Rule, len(spec)), Served: make(map[string]bool, len(served))}
	for _, a := range spec {
		p.Rules[a.Name] = Rule{Tenants: scheduler.TenantsFrom(a.Tenants), Builders: a.Builders}
	}
	for _, n := range served {
		if n.NAT || len(n.Forwards) > 0 {
			p.Served[n.Name] = true
		}
	}
	return p
}

// NeedsLabels reports whether Check may read the namespace's labels for one of networks.
func (p *Pool) NeedsLabels(networks []string) bool {
	for _, n := range networks {
		if p.Rules[n].Tenants.NeedsLabels() {
			return true
		}
	}
	return false
}

// Joiner is the Machine that asks.
type Joiner struct {
	Namespace       string
	NamespaceLabels labels.Set
	// Builder: the Machine carries computev1alpha1.LabelImageBuilder, which admission lets
	// only the manager set.
	Builder bool
}

// Refusal says which network was refused and why; Code is CodeNone when none was.
type Refusal struct {
	Code    Code
	Network string
	Pool    string
}

// Check returns the first of networks j may not join on p. A network with an entry
// allows what the entry says; one without an entry is open only while the runtime gives
// it nothing (a restricted NIC on it reaches nothing, as it did before pools declared
// networks).
func Check(p *Pool, j *Joiner, networks []string) Refusal {
	for _, n := range networks {
		if c := check(p, j, n); c != CodeNone {
			return Refusal{Code: c, Network: n, Pool: p.Name}
		}
	}
	return Refusal{}
}

func check(p *Pool, j *Joiner, network string) Code {
	rule, declared := p.Rules[network]
	if !declared {
		if p.Served[network] {
			return CodeUndeclared
		}
		return CodeNone
	}
	if rule.Builders && j.Builder {
		return CodeNone
	}
	// A nil Tenants means "every namespace" to the scheduler; on a network it means none.
	if rule.Tenants != nil && rule.Tenants.Allows(j.Namespace, j.NamespaceLabels) {
		return CodeNone
	}
	if rule.Builders {
		return CodeBuildersOnly
	}
	return CodeNotATenant
}

// String says what was refused and what to do, for a condition's message.
func (r Refusal) String() string {
	switch r.Code {
	case CodeNone:
		return ""
	case CodeUndeclared:
		return fmt.Sprintf("network %q of MachinePool %s gives its guests services and is reserved: it has no entry in the pool's spec.networks; an infrastructure admin adds one naming the namespaces that may use it", r.Network, r.Pool)
	case CodeBuildersOnly:
		return fmt.Sprintf("network %q of MachinePool %s is reserved for OS image builders; use another network, or ask an infrastructure admin to add your namespace to its spec.networks entry", r.Network, r.Pool)
	default:
		return fmt.Sprintf("network %q of MachinePool %s is not open to this namespace; use another network, or ask an infrastructure admin to add your namespace to its spec.networks entry", r.Network, r.Pool)
	}
}
