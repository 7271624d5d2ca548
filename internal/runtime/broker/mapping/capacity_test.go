package mapping

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func res(cpu, memGi int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI)}
}

type poolOpt func(*computev1alpha1.MachinePool)

func pool(name string, alloc, allocated corev1.ResourceList, opts ...poolOpt) computev1alpha1.MachinePool {
	p := computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"site": "s1"}},
		Status: computev1alpha1.MachinePoolStatus{Capacity: alloc, Allocatable: alloc, Allocated: allocated,
			Architectures:    []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64},
			Execution:        []computev1alpha1.ArchitectureExecution{{Architecture: computev1alpha1.ArchitectureAMD64, Execution: computev1alpha1.ExecutionNative}},
			SupportedClasses: []string{"small"},
			Conditions:       []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "RuntimeReachable"}}}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func notReady(p *computev1alpha1.MachinePool) { p.Status.Conditions[0].Status = metav1.ConditionFalse }
func emulatesARM(p *computev1alpha1.MachinePool) {
	p.Status.Architectures = append(p.Status.Architectures, computev1alpha1.ArchitectureARM64)
	p.Status.Execution = append(p.Status.Execution, computev1alpha1.ArchitectureExecution{Architecture: computev1alpha1.ArchitectureARM64, Execution: computev1alpha1.ExecutionEmulated})
	p.Status.SupportedClasses = append(p.Status.SupportedClasses, "large", "gone")
}
func labelled(k, v string) poolOpt { return func(p *computev1alpha1.MachinePool) { p.Labels[k] = v } }

var classes = []computev1alpha1.MachineClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Capabilities: res(2, 4)},
	{ObjectMeta: metav1.ObjectMeta{Name: "large"}, Capabilities: res(8, 32)},
}

// own is a Machine of the broker of class, architecture and pool ("" = not bound yet).
func own(class string, arch computev1alpha1.Architecture, poolName string, state computev1alpha1.MachineState) computev1alpha1.Machine {
	m := computev1alpha1.Machine{Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class}, Architecture: arch},
		Status: computev1alpha1.MachineStatus{State: state}}
	if poolName != "" {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: poolName}
	}
	return m
}

func mriRes(cpu, memGi int64) *mriv1alpha1.Resources {
	return &mriv1alpha1.Resources{MilliCpu: cpu * 1000, MemoryBytes: memGi << 30}
}

func TestStatus(t *testing.T) {
	amd, arm := mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64
	for _, tc := range []struct {
		name string
		site Site
		want *mriv1alpha1.StatusResponse
	}{
		{"nothing downstream", Site{}, &mriv1alpha1.StatusResponse{Capacity: &mriv1alpha1.Resources{}, Allocatable: &mriv1alpha1.Resources{}}},
		{"others' machines are subtracted, the broker's own added back (the upstream subtracts those)", Site{
			Pools:    []computev1alpha1.MachinePool{pool("a", res(16, 64), res(6, 12))},
			Classes:  classes,
			Machines: []computev1alpha1.Machine{own("small", "amd64", "a", computev1alpha1.MachineStateRunning)},
		}, &mriv1alpha1.StatusResponse{Capacity: mriRes(16, 64), Allocatable: mriRes(12, 56),
			Architectures: []mriv1alpha1.Architecture{amd}, NativeArchitectures: []mriv1alpha1.Architecture{amd}, SupportedClasses: []string{"small"}}},
		{"own machines on another pool, unbound or terminated add nothing", Site{
			Pools:   []computev1alpha1.MachinePool{pool("a", res(16, 64), res(6, 12))},
			Classes: classes,
			Machines: []computev1alpha1.Machine{own("small", "amd64", "b", computev1alpha1.MachineStateRunning),
				own("small", "amd64", "", computev1alpha1.MachineStatePending), own("small", "amd64", "a", computev1alpha1.MachineStateTerminated)},
		}, &mriv1alpha1.StatusResponse{Capacity: mriRes(16, 64), Allocatable: mriRes(10, 52),
			Architectures: []mriv1alpha1.Architecture{amd}, NativeArchitectures: []mriv1alpha1.Architecture{amd}, SupportedClasses: []string{"small"}}},
		{"pools summed; a pool not Ready or not selected left out; classes that exist, archs in order", Site{
			Pools: []computev1alpha1.MachinePool{pool("a", res(16, 64), nil, emulatesARM), pool("b", res(8, 16), res(10, 20)),
				pool("down", res(100, 100), nil, notReady), pool("other", res(100, 100), nil, labelled("site", "s2"))},
			Classes:  classes,
			Selector: labels.SelectorFromSet(labels.Set{"site": "s1"}),
		}, &mriv1alpha1.StatusResponse{Capacity: mriRes(24, 80), Allocatable: mriRes(16, 64),
			Architectures: []mriv1alpha1.Architecture{amd, arm}, NativeArchitectures: []mriv1alpha1.Architecture{amd}, SupportedClasses: []string{"large", "small"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.site.Status(); !proto.Equal(got, tc.want) {
				t.Fatalf("Status =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	site := Site{
		Pools:   []computev1alpha1.MachinePool{pool("a", res(8, 16), res(2, 4), emulatesARM)},
		Classes: classes,
		Machines: []computev1alpha1.Machine{own("small", "amd64", "a", computev1alpha1.MachineStateRunning),
			own("small", "amd64", "", computev1alpha1.MachineStatePending), own("large", "arm64", "", computev1alpha1.MachineStateTerminated)},
	}
	for _, tc := range []struct {
		name       string
		site       Site
		arch       computev1alpha1.Architecture
		nativeOnly bool
		demand     corev1.ResourceList
		reason     RefusalReason
		msg        string
	}{
		{"fits: 8 cpu, the broker holds 4 of them, asks 4", site, "amd64", false, res(4, 8), "", ""},
		{"one cpu too many", site, "amd64", false, res(5, 1), RefusedNoCapacity, "cpu (9 needed with the broker's machines, 8 usable)"},
		{"an architecture no pool runs", site, "riscv64", false, res(1, 1), RefusedArchitecture, "runs riscv64"},
		{"emulated only, natively asked", site, "arm64", true, res(1, 1), RefusedArchitecture, "runs arm64 natively"},
		{"emulated allowed: the arm64 share is the whole pool, the total still binds", site, "arm64", false, res(5, 1), RefusedNoCapacity, "the downstream pools lack cpu"},
		{"emulated allowed, fits", site, "arm64", false, res(4, 1), "", ""},
		{"no pool Ready", Site{Pools: []computev1alpha1.MachinePool{pool("a", res(8, 16), nil, notReady)}}, "amd64", false, res(1, 1), RefusedArchitecture, "(0 Ready and selected)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.site.Admit(tc.arch, tc.nativeOnly, tc.demand)
			if tc.reason == "" {
				if r != nil {
					t.Fatalf("Admit refused: %v", r)
				}
				return
			}
			if r == nil || r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("Admit = %+v; want %s saying %q", r, tc.reason, tc.msg)
			}
		})
	}
}

// TestAdmitNeverOvercommitsProperty (safety, E5): whatever machines come, in whatever
// order, and however the downstream binds them meanwhile, what the admitted ones ask never
// exceeds what the pools had free for the broker when it started; and binding a machine
// (the downstream poollet counting it in status.allocated) never changes what the broker
// reports (no double subtraction).
func TestAdmitNeverOvercommitsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		site := Site{Classes: classes}
		free := corev1.ResourceList{}
		for i := range rapid.IntRange(1, 3).Draw(t, "pools") {
			alloc := res(rapid.Int64Range(0, 40).Draw(t, "cpu"), rapid.Int64Range(0, 80).Draw(t, "mem"))
			others := res(rapid.Int64Range(0, 10).Draw(t, "otherCPU"), rapid.Int64Range(0, 10).Draw(t, "otherMem"))
			var opts []poolOpt
			if rapid.Bool().Draw(t, "arm") {
				opts = append(opts, emulatesARM)
			}
			p := pool(string(rune('a'+i)), alloc, others, opts...)
			site.Pools = append(site.Pools, p)
			f := alloc.DeepCopy()
			sub(f, others)
			add(free, f)
		}
		held := corev1.ResourceList{}
		for range rapid.IntRange(0, 30).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "bind") && len(site.Machines) > 0 {
				// The downstream scheduler binds one of the broker's machines; its poollet counts it.
				i := rapid.IntRange(0, len(site.Machines)-1).Draw(t, "which")
				m := &site.Machines[i]
				if m.Spec.MachinePoolRef == nil {
					before := site.Status()
					p := &site.Pools[rapid.IntRange(0, len(site.Pools)-1).Draw(t, "pool")]
					m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: p.Name}
					if p.Status.Allocated == nil {
						p.Status.Allocated = corev1.ResourceList{}
					}
					add(p.Status.Allocated, site.demand(m))
					if after := site.Status(); !proto.Equal(before.Allocatable, after.Allocatable) {
						t.Fatalf("binding a broker machine changed allocatable: %v -> %v", before.Allocatable, after.Allocatable)
					}
				}
				continue
			}
			class := rapid.SampledFrom([]string{"small", "large"}).Draw(t, "class")
			arch := rapid.SampledFrom([]computev1alpha1.Architecture{"amd64", "arm64"}).Draw(t, "arch")
			demand := classes[0].Capabilities
			if class == "large" {
				demand = classes[1].Capabilities
			}
			if site.Admit(arch, false, demand) == nil {
				site.Machines = append(site.Machines, own(class, arch, "", computev1alpha1.MachineStatePending))
				add(held, demand)
			}
		}
		for name, q := range held {
			if f := free[name]; q.Cmp(f) > 0 {
				t.Fatalf("admitted %s %s, only %s was free", name, q.String(), f.String())
			}
		}
	})
}
