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

func host(name, uid string) metalv1alpha1.Host {
	h := metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if uid != "" {
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{UID: uid}
	}
	return h
}

// clean is an end state with nothing to find: two Machines, each with its machine, one
// on a Host, each created once (a repeated create answered with the same id).
func clean() observed {
	return observed{
		machines: []computev1alpha1.Machine{converged("u1", poolFake), converged("u2", poolMetal)},
		hosts:    []metalv1alpha1.Host{host("h1", "u2"), host("h2", "")},
		runtime: map[string][]*mriv1alpha1.Machine{
			poolFake:  {runtimeMachine("f-1", "u1")},
			poolMetal: {runtimeMachine("b-1", "u2")},
		},
		journals: map[string][]mri.JournalEntry{
			poolFake:  {{UID: "u1", ID: "f-1"}, {UID: "u1", ID: "f-1"}},
			poolMetal: {{UID: "u2", ID: "b-1"}},
		},
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
}

func TestPlanKillsHitsEveryTargetAtLeastAsAsked(t *testing.T) {
	minimum := map[target]int{targetManager: 3, targetPoollet: 2, targetRuntime: 2, targetIronic: 1, targetAPIServer: 1}
	const d = 10 * time.Minute
	for seed := int64(0); seed < 200; seed++ {
		for _, pools := range [][]string{{poolFake, poolQEMU, poolMetal}, {poolFake}} {
			plan := planKills(rand.New(rand.NewSource(seed)), d, minimum, 3, pools)
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
				if tg == targetIronic && !metal {
					if counts[tg] != 0 {
						t.Fatalf("seed %d: %d Ironic kills without a metal pool", seed, counts[tg])
					}
					continue
				}
				if counts[tg] < n {
					t.Fatalf("seed %d: %d kills of %s, want at least %d", seed, counts[tg], tg, n)
				}
			}
			again := planKills(rand.New(rand.NewSource(seed)), d, minimum, 3, pools)
			if len(again) != len(plan) || again[0] != plan[0] || again[len(again)-1] != plan[len(plan)-1] {
				t.Fatalf("seed %d: two plans from one seed differ", seed)
			}
		}
	}
}
