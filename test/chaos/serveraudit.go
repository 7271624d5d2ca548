package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// auditServers adds to f what the emulated servers, their consoles and Ironic show that
// the API does not: the lies of issue 35's first run, where servers ran with no Host to
// say so, twice over, rebooted unasked, or could not be powered while every status said
// all was well.
func auditServers(o observed, f *findings) {
	byUID := map[string]*computev1alpha1.Machine{}
	for i := range o.machines {
		byUID[string(o.machines[i].UID)] = &o.machines[i]
	}
	boots := map[string]int{}
	for _, s := range o.servers {
		for hostname, n := range s.boots {
			boots[hostname] += n
		}
	}
	for _, s := range o.servers {
		h := hostOf(o.hosts, s.name)
		var m *computev1alpha1.Machine
		if h != nil && h.Spec.ConsumerRef != nil {
			m = byUID[h.Spec.ConsumerRef.UID]
		}
		switch {
		case len(s.pids) > 1:
			f.StrayServers = append(f.StrayServers, fmt.Sprintf("server %s: %d QEMUs %v", s.name, len(s.pids), s.pids))
		case len(s.pids) == 1 && h == nil:
			f.StrayServers = append(f.StrayServers, fmt.Sprintf("server %s: QEMU %d without a Host", s.name, s.pids[0]))
		case len(s.pids) == 1 && m == nil:
			// Released servers are powered off (the pool does not wipe): one running is a
			// server nobody holds, as a Host for it would not say.
			f.StrayServers = append(f.StrayServers, fmt.Sprintf("server %s: QEMU %d, its Host held by no Machine", s.name, s.pids[0]))
		}
		if m == nil || m.DeletionTimestamp != nil {
			continue
		}
		switch key := m.Namespace + "/" + m.Name; {
		case m.Status.State == computev1alpha1.MachineStateRunning && len(s.pids) == 0:
			f.StrayServers = append(f.StrayServers, fmt.Sprintf("%s: Running on server %s, which has no QEMU", key, s.name))
		case m.Status.State == computev1alpha1.MachineStateShutdown && len(s.pids) > 0:
			f.StrayServers = append(f.StrayServers, fmt.Sprintf("%s: Shutdown on server %s, whose QEMU %v runs", key, s.name, s.pids))
		case m.Status.State == computev1alpha1.MachineStateRunning && boots[m.Name] == 0:
			// Running with an empty CD drive, say: the server is on, its OS never booted.
			f.Boots = append(f.Boots, fmt.Sprintf("%s: Running on server %s, never booted there", key, s.name))
		}
	}
	for _, name := range sortedKeys(o.askedBoots) {
		if n, asked := boots[name], o.askedBoots[name]; n > asked {
			f.Boots = append(f.Boots, fmt.Sprintf("%s/%s: booted %d times, asked %d (create, power-ons, reimages)", namespace, name, n, asked))
		}
	}
	for _, h := range o.hosts {
		node, known := o.nodes[h.Name]
		why := ""
		switch {
		case h.PowerFailing():
			why = fmt.Sprintf("%d power changes to %s failed", h.Status.PowerChange.Failures, h.Status.PowerChange.Target)
		case known && ironicPowerFailed(h, node):
			why = fmt.Sprintf("Ironic's power is %s, spec.online %v, last_error %q", powerWord(node.PowerOn), h.Spec.Online, node.LastError)
		default:
			continue
		}
		if !saysPowerFails(h) {
			f.PowerUnreported = append(f.PowerUnreported, fmt.Sprintf("Host %s: %s; the Host says %s", h.Name, why, readyOf(h)))
		}
	}
}

// serverBoots says, for the report, which Machines each server booted how often, against
// the boots asked of them.
func serverBoots(o observed) []string {
	var out []string
	for _, s := range o.servers {
		line := fmt.Sprintf("server %s (QEMU %v) booted", s.name, s.pids)
		if len(s.boots) == 0 {
			line += " nothing"
		}
		for _, name := range sortedKeys(s.boots) {
			line += fmt.Sprintf(" %s %d times (asked %d),", name, s.boots[name], o.askedBoots[name])
		}
		out = append(out, strings.TrimSuffix(line, ","))
	}
	return out
}

// ironicPowerFailed reports whether Ironic, done with the node, has a failure on record
// and the server's power other than the Host's spec.online asks.
func ironicPowerFailed(h metalv1alpha1.Host, n provisioner.Node) bool {
	return n.LastError != "" && !n.Busy && n.PowerOn != nil && *n.PowerOn != h.Spec.Online
}

// saysPowerFails reports whether the Host tells its reader that something fails: Ready
// False for PowerChangeFailed, or a lastError (which the ERROR column shows).
func saysPowerFails(h metalv1alpha1.Host) bool {
	c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionReady)
	return h.Status.LastError != "" || c != nil && c.Status == metav1.ConditionFalse && c.Reason == metalv1alpha1.ReasonPowerChangeFailed
}

func readyOf(h metalv1alpha1.Host) string {
	c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionReady)
	if c == nil {
		return "no Ready condition, no lastError"
	}
	return fmt.Sprintf("Ready %s (%s), no lastError", c.Status, c.Reason)
}

func powerWord(on *bool) string {
	switch {
	case on == nil:
		return "unknown"
	case *on:
		return "on"
	}
	return "off"
}
