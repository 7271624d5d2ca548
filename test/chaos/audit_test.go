package main

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// converged is a Machine bound to pool whose status is what its spec asks.
func converged(uid, pool string) computev1alpha1.Machine {
	return computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "m-" + uid, UID: types.UID(uid), Generation: 2},
		Spec: computev1alpha1.MachineSpec{Image: "img:a", Power: computev1alpha1.PowerOn,
			MachinePoolRef: &computev1alpha1.LocalObjectReference{Name: pool}},
		Status: computev1alpha1.MachineStatus{ObservedGeneration: 2, State: computev1alpha1.MachineStateRunning,
			Image: &computev1alpha1.BootedImage{Reference: "img:a"}},
	}
}

func runtimeMachine(id, uid string) *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: id, Labels: map[string]string{mri.LabelMachineUID: uid}}}
}

// host is a Host held by the Machine of uid (none when empty), online while held.
func host(name, uid string) metalv1alpha1.Host {
	h := metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if uid != "" {
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{UID: uid}
		h.Spec.Online = true
	}
	return h
}

// failingPower gives the Host a record of power changes to On that keep failing.
func failingPower(h *metalv1alpha1.Host) {
	h.Status.PowerState = metalv1alpha1.PowerOff
	h.Status.PowerChange = &metalv1alpha1.PowerChange{Target: metalv1alpha1.PowerOn, Attempts: 3, Failures: 3}
}

// clean is an end state with nothing to find: three Machines, each with its machine, two
// on a Host, each created once (a repeated create answered with the same id); the third
// on an emulated server, which runs one QEMU and booted it once, as asked; Ironic's
// power as the Hosts ask, without an error.
func clean() observed {
	on, off := true, false
	return observed{
		machines: []computev1alpha1.Machine{converged("u1", poolFake), converged("u2", poolMetal), converged("u3", poolMetal)},
		hosts:    []metalv1alpha1.Host{host("h1", "u2"), host("h2", ""), host("emulated-1", "u3")},
		runtime: map[string][]*mriv1alpha1.Machine{
			poolFake:  {runtimeMachine("f-1", "u1")},
			poolMetal: {runtimeMachine("b-1", "u2"), runtimeMachine("b-3", "u3")},
		},
		journals: map[string][]mri.JournalEntry{
			poolFake:  {{UID: "u1", ID: "f-1"}, {UID: "u1", ID: "f-1"}},
			poolMetal: {{UID: "u2", ID: "b-1"}, {UID: "u3", ID: "b-3"}},
		},
		servers: []server{{name: "emulated-1", pids: []int{4242}, boots: map[string]int{"m-u3": 1}}},
		nodes: map[string]provisioner.Node{"h1": {PowerOn: &on}, "h2": {PowerOn: &off},
			"emulated-1": {PowerOn: &on, LastError: "an old failure, since overcome"}},
		askedBoots: map[string]int{"m-u3": 1},
	}
}

func TestAuditFindsEachKindOfLie(t *testing.T) {
	now := metav1.NewTime(time.Now())
	for _, c := range []struct {
		name   string
		change func(*observed)
		count  func(findings) int
	}{
		{"an orphan", func(o *observed) { o.runtime[poolFake] = append(o.runtime[poolFake], runtimeMachine("f-9", "gone")) },
			func(f findings) int { return len(f.Orphans) }},
		{"a Machine without its machine", func(o *observed) { o.runtime[poolFake] = nil },
			func(f findings) int { return len(f.Missing) }},
		{"a Machine on two Hosts", func(o *observed) { o.hosts[1] = host("h2", "u2") },
			func(f findings) int { return len(f.DoubleClaimed) }},
		{"a Machine in two pools", func(o *observed) {
			o.runtime[poolMetal] = append(o.runtime[poolMetal], runtimeMachine("b-2", "u1"))
		}, func(f findings) int { return len(f.DuplicateCreates) }},
		{"one Machine created twice", func(o *observed) {
			o.journals[poolFake] = append(o.journals[poolFake], mri.JournalEntry{UID: "u1", ID: "f-2"})
		}, func(f findings) int { return len(f.DuplicateCreates) }},
		{"a deletion not finished", func(o *observed) { o.machines[0].DeletionTimestamp = &now },
			func(f findings) int { return len(f.NotConverged) }},
		{"a generation not observed", func(o *observed) { o.machines[0].Generation = 3 },
			func(f findings) int { return len(f.NotConverged) }},
		{"a Machine asked off that runs", func(o *observed) { o.machines[0].Spec.Power = computev1alpha1.PowerOff },
			func(f findings) int { return len(f.NotConverged) }},
		{"an image not booted", func(o *observed) { o.machines[0].Spec.Image = "img:b" },
			func(f findings) int { return len(f.NotConverged) }},
		{"a Machine never scheduled", func(o *observed) { o.machines[0].Spec.MachinePoolRef = nil; o.runtime[poolFake] = nil },
			func(f findings) int { return len(f.NotConverged) }},
		{"a server with two QEMUs", func(o *observed) { o.servers[0].pids = []int{4242, 4343} },
			func(f findings) int { return len(f.StrayServers) }},
		{"a server's QEMU without a Host", func(o *observed) { o.hosts = o.hosts[:2] },
			func(f findings) int { return len(f.StrayServers) }},
		{"a server's QEMU that no Machine holds", func(o *observed) { o.hosts[2].Spec.ConsumerRef = nil },
			func(f findings) int { return len(f.StrayServers) }},
		{"a Machine Running on a server without a QEMU", func(o *observed) { o.servers[0].pids = nil },
			func(f findings) int { return len(f.StrayServers) }},
		{"a Machine Shutdown on a server whose QEMU runs", func(o *observed) {
			o.machines[2].Spec.Power, o.machines[2].Status.State = computev1alpha1.PowerOff, computev1alpha1.MachineStateShutdown
		}, func(f findings) int { return len(f.StrayServers) }},
		{"a server booted more often than asked", func(o *observed) { o.servers[0].boots["m-u3"] = 2 },
			func(f findings) int { return len(f.Boots) }},
		{"a deleted Machine booted more often than asked", func(o *observed) {
			o.servers[0].boots["srv-gone"], o.askedBoots["srv-gone"] = 3, 2
		}, func(f findings) int { return len(f.Boots) }},
		{"a Machine Running on a server that never booted it", func(o *observed) { o.servers[0].boots = map[string]int{} },
			func(f findings) int { return len(f.Boots) }},
		{"a Host whose power changes fail, unreported", func(o *observed) { failingPower(&o.hosts[2]) },
			func(f findings) int { return len(f.PowerUnreported) }},
		{"Ironic failing to power a Host, unreported", func(o *observed) {
			off := false
			o.nodes["emulated-1"] = provisioner.Node{PowerOn: &off, LastError: "Failed to change power state to 'power on'"}
		}, func(f findings) int { return len(f.PowerUnreported) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := clean()
			c.change(&o)
			f := audit(o)
			if c.count(f) != 1 {
				t.Errorf("found %+v, want exactly one of its kind", f)
			}
		})
	}
	if f := audit(clean()); !f.zero() {
		t.Errorf("a clean end state: found %+v", f)
	}
	// What the run must not count: a power failure the Host reports, in either way, and
	// fewer boots than asked (a power-on that came before the power-off was carried out).
	for _, c := range []struct {
		name   string
		change func(*observed)
	}{
		{"a power failure reported by Ready", func(o *observed) {
			failingPower(&o.hosts[2])
			o.hosts[2].Status.Conditions = []metav1.Condition{{Type: metalv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: metalv1alpha1.ReasonPowerChangeFailed}}
		}},
		{"a power failure reported by lastError", func(o *observed) {
			off := false
			o.nodes["emulated-1"] = provisioner.Node{PowerOn: &off, LastError: "Failed to change power state to 'power on'"}
			o.hosts[2].Status.LastError = "Failed to change power state to 'power on'"
		}},
		{"a power change Ironic is still carrying out", func(o *observed) {
			off := false
			o.nodes["emulated-1"] = provisioner.Node{PowerOn: &off, Busy: true, LastError: "an old failure"}
		}},
		{"fewer boots than asked", func(o *observed) { o.askedBoots["m-u3"] = 3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := clean()
			c.change(&o)
			if f := audit(o); !f.zero() {
				t.Errorf("found %+v, want nothing", f)
			}
		})
	}
}

func TestBootsOnCountsEachHostnamesReadyLines(t *testing.T) {
	console := "SeaBIOS (version 1.16)\r\n" +
		"ANVIL-TESTOS-READY arch=x86_64 hostname=srv-1 marker=none\r\n" +
		"ANVIL-TESTOS-META something=else\n" +
		"ANVIL-TESTOS-READY arch=x86_64 hostname=srv-1 marker=none\n" +
		"ANVIL-TESTOS-READY arch=aarch64 hostname=srv-2 marker=x\n" +
		"ANVIL-TESTOS-READY arch=x86_64 hostname=srv-3" // cut short by a kill: not a boot read whole
	got := bootsOn([]byte(console))
	if len(got) != 2 || got["srv-1"] != 2 || got["srv-2"] != 1 {
		t.Errorf("bootsOn = %v, want srv-1 twice and srv-2 once", got)
	}
}

func TestPlanKillsHitsEveryTargetAtLeastAsAsked(t *testing.T) {
	minimum := map[target]int{targetManager: 3, targetPoollet: 2, targetRuntime: 2, targetIronic: 1, targetAPIServer: 1, targetEmulator: 2}
	const d = 10 * time.Minute
	for seed := int64(0); seed < 200; seed++ {
		for _, run := range []struct {
			pools   []string
			servers bool
		}{{[]string{poolFake, poolQEMU, poolMetal}, true}, {[]string{poolFake, poolQEMU, poolMetal}, false}, {[]string{poolFake}, false}} {
			pools := run.pools
			plan := planKills(rand.New(rand.NewSource(seed)), d, minimum, 3, pools, run.servers)
			counts := map[target]int{}
			for i, k := range plan {
				counts[k.target]++
				if k.at < d/10 || k.at > d*9/10 || (i > 0 && k.at < plan[i-1].at) {
					t.Fatalf("seed %d: kill %d at %s: out of order or outside the run's middle", seed, i, k.at)
				}
				if (k.target == targetPoollet || k.target == targetRuntime) && !slices.Contains(pools, k.pool) {
					t.Fatalf("seed %d: kill %s of a pool the run does not have", seed, k)
				}
			}
			hit := map[target]map[string]bool{targetPoollet: {}, targetRuntime: {}}
			for _, k := range plan {
				if hit[k.target] != nil {
					hit[k.target][k.pool] = true
				}
			}
			for _, tg := range []target{targetPoollet, targetRuntime} {
				if want := min(minimum[tg], len(pools)); len(hit[tg]) < want {
					t.Fatalf("seed %d: %s kills hit pools %v, want %d of %v", seed, tg, hit[tg], want, pools)
				}
			}
			metal := len(pools) == 3
			for tg, n := range minimum {
				if tg == targetIronic && !metal || tg == targetEmulator && !run.servers {
					if counts[tg] != 0 {
						t.Fatalf("seed %d: %d kills of %s, which the run does not have", seed, counts[tg], tg)
					}
					continue
				}
				if counts[tg] < n {
					t.Fatalf("seed %d: %d kills of %s, want at least %d", seed, counts[tg], tg, n)
				}
			}
			again := planKills(rand.New(rand.NewSource(seed)), d, minimum, 3, pools, run.servers)
			if !slices.Equal(again, plan) {
				t.Fatalf("seed %d: two plans from one seed differ", seed)
			}
		}
	}
}
