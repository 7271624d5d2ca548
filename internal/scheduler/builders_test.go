package scheduler

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const gi = int64(1) << 30

// poolBuilder makes a Ready, fresh, amd64 pool supporting class index 0 with 8 cpu and 16Gi.
type poolBuilder struct{ p Pool }

func newPool(name string) *poolBuilder {
	return &poolBuilder{Pool{
		Name: name, Ready: true, HeartbeatExpiry: testNow.Add(time.Minute),
		Architectures: ArchSetOf(computev1alpha1.ArchitectureAMD64),
		Classes:       Bitset{}.With(0),
		Allocatable:   Resources{MilliCPU: 8000, Memory: 16 * gi},
	}}
}

func (b *poolBuilder) arch(a ...computev1alpha1.Architecture) *poolBuilder {
	b.p.Architectures = ArchSetOf(a...)
	return b
}
func (b *poolBuilder) native(a ...computev1alpha1.Architecture) *poolBuilder {
	b.p.Native = ArchSetOf(a...)
	return b
}
func (b *poolBuilder) classes(idx ...int) *poolBuilder {
	b.p.Classes = nil
	for _, i := range idx {
		b.p.Classes = b.p.Classes.With(i)
	}
	return b
}
func (b *poolBuilder) alloc(milliCPU, mem int64) *poolBuilder {
	b.p.Allocatable.MilliCPU, b.p.Allocatable.Memory = milliCPU, mem
	return b
}
func (b *poolBuilder) ext(name string, v int64) *poolBuilder {
	if b.p.Allocatable.Extended == nil {
		b.p.Allocatable.Extended = map[corev1.ResourceName]int64{}
	}
	b.p.Allocatable.Extended[corev1.ResourceName(name)] = v
	return b
}
func (b *poolBuilder) taint(key, value string, effect corev1.TaintEffect) *poolBuilder {
	b.p.Taints = append(b.p.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}
func (b *poolBuilder) labels(kv ...string) *poolBuilder {
	b.p.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		b.p.Labels[kv[i]] = kv[i+1]
	}
	return b
}
func (b *poolBuilder) notReady() *poolBuilder          { b.p.Ready = false; return b }
func (b *poolBuilder) expired() *poolBuilder           { b.p.HeartbeatExpiry = testNow; return b }
func (b *poolBuilder) tenants(t *Tenants) *poolBuilder { b.p.Tenants = t; return b }
func (b *poolBuilder) build() *Pool                    { p := b.p; return &p }

func smallClass() *Class {
	return &Class{Name: "small", Index: 0, Demand: Resources{MilliCPU: 1000, Memory: 2 * gi}, Architectures: AnyArch}
}

func request(c *Class) *Request {
	return &Request{Namespace: "team-a", Class: c, Architectures: AnyArch}
}

func names(pools []*Pool) []string {
	out := make([]string, len(pools))
	for i, p := range pools {
		out[i] = p.Name
	}
	return out
}

func poolName(i int) string { return fmt.Sprintf("pool-%04d", i) }
