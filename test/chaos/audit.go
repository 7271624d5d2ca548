package main

import (
	"fmt"
	"slices"
	"sort"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// observed is what the run reads at the end: the API's Machines and Hosts, each pool's
// runtime machines (ListMachines over its socket) and each runtime's create journal; with
// emulated servers, each server's QEMUs and console, Ironic's node of each Host, and the
// boots the churn asked of each Machine on a server.
type observed struct {
	machines []computev1alpha1.Machine
	hosts    []metalv1alpha1.Host
	runtime  map[string][]*mriv1alpha1.Machine
	journals map[string][]mri.JournalEntry
	servers  []server
	// nodes are Ironic's nodes by Host name (a Host not registered has none).
	nodes map[string]provisioner.Node
	// askedBoots counts, by Machine name, its create, power-ons and reimages.
	askedBoots map[string]int
}

// findings are the counts the run must end with at zero, each as the list of what
// was found (one line each, for the report).
type findings struct {
	// Orphans: runtime machines whose Machine no longer exists.
	Orphans []string
	// Missing: Machines bound to a pool, not being deleted, whose pool has no machine for them.
	Missing []string
	// DoubleClaimed: Hosts held by a Machine that holds another Host too, or whose
	// consumer's runtime machine is on another pool.
	DoubleClaimed []string
	// NotConverged: Machines whose status is not what their spec asks (a deletion not
	// finished, a generation not observed, another power state or image).
	NotConverged []string
	// DuplicateCreates: Machines a runtime answered a create for with more than one
	// machine id, or that more than one pool created a machine for.
	DuplicateCreates []string
	// StrayServers: emulated servers with two QEMUs, or one running without a Host or a
	// Machine on it, and Machines whose server's QEMU runs when they say Shutdown or is
	// gone when they say Running.
	StrayServers []string
	// Boots: Machines whose names booted on the servers' consoles more often than the
	// churn asked (a create, each power-on, each reimage), or Running without a boot.
	Boots []string
	// PowerUnreported: Hosts whose power failed (status.powerChange, or Ironic's
	// last_error with the power other than asked) that say neither Ready False
	// PowerChangeFailed nor a lastError.
	PowerUnreported []string
}

func (f findings) zero() bool {
	return len(f.Orphans)+len(f.Missing)+len(f.DoubleClaimed)+len(f.NotConverged)+len(f.DuplicateCreates)+
		len(f.StrayServers)+len(f.Boots)+len(f.PowerUnreported) == 0
}

// audit compares the Machines with what the runtimes hold and created, and the Hosts
// with the emulated servers and Ironic.
func audit(o observed) findings {
	var f findings
	byUID := map[string]*computev1alpha1.Machine{}
	for i := range o.machines {
		byUID[string(o.machines[i].UID)] = &o.machines[i]
	}
	// Where each Machine's runtime machines are.
	heldIn := map[string][]string{}
	for _, pool := range sortedKeys(o.runtime) {
		for _, rm := range o.runtime[pool] {
			uid := rm.GetMetadata().GetLabels()[mri.LabelMachineUID]
			heldIn[uid] = append(heldIn[uid], pool)
			if _, ok := byUID[uid]; !ok {
				f.Orphans = append(f.Orphans, fmt.Sprintf("%s: machine %s of Machine uid %s", pool, rm.GetMetadata().GetId(), uid))
			}
		}
	}
	for _, m := range o.machines {
		key := m.Namespace + "/" + m.Name
		pools := heldIn[string(m.UID)]
		bound := m.Spec.MachinePoolRef != nil
		if bound && m.DeletionTimestamp == nil && !slices.Contains(pools, m.Spec.MachinePoolRef.Name) {
			f.Missing = append(f.Missing, fmt.Sprintf("%s: bound to %s, which has no machine for it", key, m.Spec.MachinePoolRef.Name))
		}
		if len(pools) > 1 {
			f.DuplicateCreates = append(f.DuplicateCreates, fmt.Sprintf("%s: machines in pools %v", key, pools))
		}
		if why := notConverged(&m); why != "" {
			f.NotConverged = append(f.NotConverged, key+": "+why)
		}
	}
	for _, pool := range sortedKeys(o.journals) {
		ids := map[string]map[string]bool{}
		for _, e := range o.journals[pool] {
			if ids[e.UID] == nil {
				ids[e.UID] = map[string]bool{}
			}
			ids[e.UID][e.ID] = true
		}
		for _, uid := range sortedKeys(ids) {
			if len(ids[uid]) > 1 {
				f.DuplicateCreates = append(f.DuplicateCreates, fmt.Sprintf("%s: Machine uid %s created as %v", pool, uid, sortedKeys(ids[uid])))
			}
		}
	}
	hostsOf := map[string][]string{}
	for _, h := range o.hosts {
		if h.Spec.ConsumerRef != nil {
			hostsOf[h.Spec.ConsumerRef.UID] = append(hostsOf[h.Spec.ConsumerRef.UID], h.Name)
		}
	}
	for _, uid := range sortedKeys(hostsOf) {
		if hosts := hostsOf[uid]; len(hosts) > 1 {
			f.DoubleClaimed = append(f.DoubleClaimed, fmt.Sprintf("Machine uid %s holds Hosts %v", uid, hosts))
		}
	}
	auditServers(o, &f)
	return f
}

// notConverged says how a Machine's status differs from its spec, or "".
func notConverged(m *computev1alpha1.Machine) string {
	switch {
	case m.DeletionTimestamp != nil:
		return "deletion not finished"
	case m.Spec.MachinePoolRef == nil:
		return "not scheduled"
	case m.Status.ObservedGeneration != m.Generation:
		return fmt.Sprintf("generation %d observed as %d", m.Generation, m.Status.ObservedGeneration)
	}
	want := computev1alpha1.MachineStateRunning
	if m.Spec.Power == computev1alpha1.PowerOff {
		want = computev1alpha1.MachineStateShutdown
	}
	if m.Status.State != want {
		return fmt.Sprintf("state %s, spec.power %s", m.Status.State, m.Spec.Power)
	}
	if m.Status.Image == nil || m.Status.Image.Reference != m.Spec.Image {
		return fmt.Sprintf("booted %v, spec.image %s", m.Status.Image, m.Spec.Image)
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
