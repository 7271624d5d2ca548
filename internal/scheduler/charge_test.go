package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func machineOn(pool, class string, state computev1alpha1.MachineState) computev1alpha1.Machine {
	m := computev1alpha1.Machine{Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class}},
		Status: computev1alpha1.MachineStatus{State: state}}
	if pool != "" {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
	}
	return m
}

func TestCharge(t *testing.T) {
	deleting := machineOn("p", "small", computev1alpha1.MachineStateTerminating)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name      string
		m         computev1alpha1.Machine
		wantPool  string
		wantClass string
		wantOK    bool
	}{
		{"unbound holds nothing", machineOn("", "small", ""), "", "", false},
		{"bound, not yet reported", machineOn("p", "small", ""), "p", "small", true},
		{"bound and pending", machineOn("p", "small", computev1alpha1.MachineStatePending), "p", "small", true},
		{"running", machineOn("p", "small", computev1alpha1.MachineStateRunning), "p", "small", true},
		{"powered off still holds its share", machineOn("p", "small", computev1alpha1.MachineStateShutdown), "p", "small", true},
		{"being deleted holds until gone", deleting, "p", "small", true},
		{"terminated holds nothing", machineOn("p", "small", computev1alpha1.MachineStateTerminated), "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, class, ok := Charge(&tc.m)
			if pool != tc.wantPool || class != tc.wantClass || ok != tc.wantOK {
				t.Fatalf("Charge = %q, %q, %v; want %q, %q, %v", pool, class, ok, tc.wantPool, tc.wantClass, tc.wantOK)
			}
		})
	}
}

func TestAllocated(t *testing.T) {
	classes := map[string]Resources{
		"small": {MilliCPU: 1000, Memory: 2 * gi},
		"gpu":   {MilliCPU: 4000, Memory: 8 * gi, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}},
	}
	running := computev1alpha1.MachineStateRunning
	for _, tc := range []struct {
		name     string
		machines []computev1alpha1.Machine
		want     corev1.ResourceList
	}{
		{"no Machines: zero cpu and memory, said", nil, corev1.ResourceList{"cpu": resource.MustParse("0"), "memory": resource.MustParse("0")}},
		{"two of one class", []computev1alpha1.Machine{machineOn("p", "small", running), machineOn("p", "small", "")},
			corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi")}},
		{"extended resources summed", []computev1alpha1.Machine{machineOn("p", "gpu", running), machineOn("p", "gpu", running), machineOn("p", "small", running)},
			corev1.ResourceList{"cpu": resource.MustParse("9"), "memory": resource.MustParse("18Gi"), "nvidia.com/gpu": resource.MustParse("2")}},
		{"other pools, unbound, Terminated and unknown classes count for nothing", []computev1alpha1.Machine{
			machineOn("p", "small", running), machineOn("q", "gpu", running), machineOn("", "gpu", ""),
			machineOn("p", "gpu", computev1alpha1.MachineStateTerminated), machineOn("p", "absent", running)},
			corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("2Gi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Allocated("p", tc.machines, classes).List()
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("Allocated = %v, want %v", got, tc.want)
			}
			if back := ResourcesFrom(got); !equality.Semantic.DeepEqual(back.List(), got) {
				t.Fatalf("List and ResourcesFrom disagree: %v -> %+v -> %v", got, back, back.List())
			}
		})
	}
}

// A poollet's count (Allocated over the Machines as they are) is what the scheduler's
// Cache holds against the pool after seeing the same Machines' changes one by one, as the
// scheduler's Machine handler feeds it (Observe what Charge names, Forget the rest).
func TestAllocatedAgreesWithTheCache(t *testing.T) {
	classes := map[string]Resources{
		"small": {MilliCPU: 1000, Memory: 2 * gi},
		"gpu":   {MilliCPU: 4000, Memory: 8 * gi, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}},
	}
	pools := []string{"p", "q", ""}
	states := []computev1alpha1.MachineState{"", computev1alpha1.MachineStatePending, computev1alpha1.MachineStateRunning,
		computev1alpha1.MachineStateShutdown, computev1alpha1.MachineStateTerminating, computev1alpha1.MachineStateTerminated}
	rapid.Check(t, func(t *rapid.T) {
		c := NewCache()
		for name, d := range classes {
			c.SetClass(name, d, AnyArch)
		}
		c.SetPool(Pool{Name: "p"})
		c.SetPool(Pool{Name: "q"})
		machines := map[types.UID]computev1alpha1.Machine{}
		for i := range rapid.IntRange(0, 40).Draw(t, "steps") {
			uid := types.UID(fmt.Sprint(rapid.IntRange(0, 7).Draw(t, fmt.Sprintf("uid%d", i))))
			if rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("delete%d", i)) == 0 {
				delete(machines, uid)
				c.Forget(uid)
				continue
			}
			m, seen := machines[uid]
			if !seen || m.Spec.MachinePoolRef == nil {
				// A class and pool are set once: the API refuses their change once bound.
				m = machineOn(rapid.SampledFrom(pools).Draw(t, fmt.Sprintf("pool%d", i)),
					rapid.SampledFrom([]string{"small", "gpu", "absent"}).Draw(t, fmt.Sprintf("class%d", i)), "")
			}
			m.Status.State = rapid.SampledFrom(states).Draw(t, fmt.Sprintf("state%d", i))
			machines[uid] = m
			if pool, class, ok := Charge(&m); ok {
				c.Observe(uid, pool, class)
			} else {
				c.Forget(uid)
			}
		}
		list := make([]computev1alpha1.Machine, 0, len(machines))
		for _, m := range machines {
			list = append(list, m)
		}
		for _, pool := range []string{"p", "q"} {
			p, _ := c.Pool(pool)
			if got, want := Allocated(pool, list, classes).List(), p.Used().List(); !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("pool %s: Allocated %v, the Cache holds %v", pool, got, want)
			}
		}
	})
}
