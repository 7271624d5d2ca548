package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// benchFleet is 1,000 pools and 20 classes shaped like a real fleet: two architectures,
// most classes supported everywhere, a tenth of the pools tainted, a fifth with a GPU,
// and pools already partly used.
func benchFleet(b *testing.B) (*Cache, []*Class) {
	c := NewCache()
	var classes []*Class
	for i := 0; i < 20; i++ {
		d := Resources{MilliCPU: int64(1+i%8) * 1000, Memory: int64(1+i%8) * 2 * gi}
		if i%10 == 9 {
			d.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}
		}
		name := fmt.Sprintf("class-%02d", i)
		c.SetClass(name, d, AnyArch)
		classes = append(classes, c.Class(name))
	}
	for i := 0; i < 1000; i++ {
		p := Pool{
			Name: poolName(i), Ready: true,
			Architectures: ArchSetOf([]computev1alpha1.Architecture{"amd64", "arm64"}[i%2]),
			Allocatable:   Resources{MilliCPU: 64000, Memory: 256 * gi},
			Labels:        map[string]string{"zone": fmt.Sprintf("zone-%d", i%3)},
		}
		for j, cl := range classes {
			if (i+j)%7 != 0 {
				p.Classes = p.Classes.With(cl.Index)
			}
		}
		if i%10 == 0 {
			p.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}
		if i%5 == 0 {
			p.Allocatable.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": 4}
		}
		c.SetPool(p)
		c.SetHeartbeat(p.Name, testNow.Add(3600e9))
	}
	for i := 0; i < 4000; i++ { // about a quarter of the fleet in use
		c.Observe(types.UID(fmt.Sprintf("bound-%d", i)), poolName(i%1000), classes[i%20].Name)
	}
	return c, classes
}

// BenchmarkScheduleDecision is one decision among 1,000 pools and 20 classes (the issue's
// target: at most 50µs). The cache is not charged, so every iteration sees the same fleet.
func BenchmarkScheduleDecision(b *testing.B) {
	c, classes := benchFleet(b)
	reqs := make([]*Request, len(classes))
	for i, cl := range classes {
		reqs[i] = &Request{Namespace: "team-a", Class: cl, Architectures: AnyArch}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := Schedule(c.sorted, reqs[i%len(reqs)], testNow, StrategySpread); d.Pool == nil {
			b.Fatal("nothing fits")
		}
	}
}

// BenchmarkScheduleAndAssume includes the charge, as the controller runs it.
func BenchmarkScheduleAndAssume(b *testing.B) {
	c, classes := benchFleet(b)
	req := &Request{Namespace: "team-a", Class: classes[0], Architectures: AnyArch}
	uids := make([]types.UID, b.N)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprintf("m-%d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.ScheduleAndAssume(uids[i], req, testNow, StrategySpread)
		c.Forget(uids[i])
	}
}
