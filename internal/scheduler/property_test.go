package scheduler

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// world is a random set of pools and classes in a Cache, and a random stream of Machines.
type world struct {
	cache   *Cache
	classes []*Class
	pools   []Pool
}

func genWorld(t *rapid.T) *world {
	w := &world{cache: NewCache()}
	archs := computev1alpha1.KnownArchitectures[:2]
	nClasses := rapid.IntRange(1, 4).Draw(t, "classes")
	for i := 0; i < nClasses; i++ {
		name := fmt.Sprintf("c%d", i)
		d := Resources{
			MilliCPU: int64(rapid.IntRange(1, 8).Draw(t, "cpu")) * 500,
			Memory:   int64(rapid.IntRange(1, 8).Draw(t, "mem")) * gi,
		}
		if rapid.Bool().Draw(t, "gpu") {
			d.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}
		}
		w.cache.SetClass(name, d, AnyArch)
		w.classes = append(w.classes, w.cache.Class(name))
	}
	nPools := rapid.IntRange(0, 6).Draw(t, "pools")
	for i := 0; i < nPools; i++ {
		p := Pool{
			Name:          poolName(i),
			Ready:         rapid.IntRange(0, 4).Draw(t, "ready") > 0,
			Architectures: ArchSetOf(rapid.SampledFrom(archs).Draw(t, "arch")),
			Allocatable: Resources{
				MilliCPU: int64(rapid.IntRange(0, 16).Draw(t, "poolcpu")) * 1000,
				Memory:   int64(rapid.IntRange(0, 32).Draw(t, "poolmem")) * gi,
			},
		}
		if gpus := rapid.IntRange(0, 2).Draw(t, "poolgpu"); gpus > 0 {
			p.Allocatable.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": int64(gpus)}
		}
		for _, c := range w.classes {
			if rapid.IntRange(0, 3).Draw(t, "supports") > 0 {
				p.Classes = p.Classes.With(c.Index)
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "tainted") == 0 {
			p.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}
		for _, key := range []string{"maintenance", "old-hardware"} {
			if rapid.IntRange(0, 3).Draw(t, "preferNoSchedule") == 0 {
				p.Taints = append(p.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectPreferNoSchedule})
			}
		}
		w.cache.SetPool(p)
		w.cache.SetHeartbeat(p.Name, testNow.Add(time.Minute))
		w.pools = append(w.pools, p)
	}
	return w
}

func genRequest(t *rapid.T, w *world) *Request {
	r := &Request{
		Namespace:     "ns",
		Class:         rapid.SampledFrom(w.classes).Draw(t, "class"),
		Architectures: AnyArch,
	}
	if rapid.Bool().Draw(t, "pinArch") {
		r.Architectures = ArchSetOf(rapid.SampledFrom(computev1alpha1.KnownArchitectures[:2]).Draw(t, "reqArch"))
	}
	if rapid.Bool().Draw(t, "tolerates") {
		r.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	if rapid.IntRange(0, 3).Draw(t, "toleratesMaintenance") == 0 {
		r.Tolerations = append(r.Tolerations, corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists})
	}
	return r
}

func fits(free, demand Resources) bool { return shortfall(demand, free) == "" }

// Safety: whatever the order of decisions, no pool is over-committed, and no decision
// picks a pool that a filter rejects at the moment of the decision.
func TestPropertyNeverOverCommitsNorBindsWhereAFilterRejects(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		n := rapid.IntRange(1, 40).Draw(t, "machines")
		for i := 0; i < n; i++ {
			r := genRequest(t, w)
			before := map[string]Pool{}
			for _, p := range w.pools {
				before[p.Name], _ = w.cache.Pool(p.Name)
			}
			uid := types.UID(fmt.Sprintf("m%d", i))
			d := w.cache.ScheduleAndAssume(uid, r, testNow, rapid.SampledFrom([]Strategy{StrategySpread, StrategyPack}).Draw(t, "strategy"))
			if d.Pool != nil {
				p := before[d.Pool.Name]
				if reason := Fits(&p, r, testNow); reason.Code != ReasonNone {
					t.Fatalf("bound to %s, which a filter rejects: %s", p.Name, reason)
				}
			}
			for _, p := range w.pools {
				got, _ := w.cache.Pool(p.Name)
				if !fits(got.Allocatable, got.Used()) {
					t.Fatalf("pool %s over-committed: used %+v of %+v", p.Name, got.Used(), got.Allocatable)
				}
			}
			// Sometimes a Machine is deleted, freeing its pool.
			if rapid.IntRange(0, 5).Draw(t, "delete") == 0 {
				w.cache.Forget(types.UID(fmt.Sprintf("m%d", rapid.IntRange(0, i).Draw(t, "victim"))))
			}
		}
	})
}

// Liveness: a Machine that some pool can hold is bound. Retrying pending Machines until
// nothing changes leaves only Machines that no pool can hold.
func TestPropertyEveryPlaceableMachineIsBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		n := rapid.IntRange(1, 40).Draw(t, "machines")
		pending := map[types.UID]*Request{}
		for i := 0; i < n; i++ {
			pending[types.UID(fmt.Sprintf("m%d", i))] = genRequest(t, w)
		}
		for progress := true; progress; {
			progress = false
			for uid, r := range pending {
				if d := w.cache.ScheduleAndAssume(uid, r, testNow, StrategySpread); d.Pool != nil {
					delete(pending, uid)
					progress = true
				} else if d.Rejections.Total != len(w.pools) {
					t.Fatalf("rejections cover %d pools, want %d", d.Rejections.Total, len(w.pools))
				}
			}
		}
		for uid, r := range pending {
			for _, p := range w.pools {
				cur, _ := w.cache.Pool(p.Name)
				if Fits(&cur, r, testNow).Code == ReasonNone {
					t.Fatalf("%s is left pending though pool %s can hold it", uid, p.Name)
				}
			}
		}
	})
}

// A PreferNoSchedule taint only ranks: a decision never picks a pool with more untolerated
// PreferNoSchedule taints than another pool that fits, and never leaves a Machine pending
// because of them.
func TestPropertyPreferNoScheduleOnlyRanks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		n := rapid.IntRange(1, 20).Draw(t, "machines")
		for i := 0; i < n; i++ {
			r := genRequest(t, w)
			var fitting []Pool
			for _, p := range w.pools {
				cur, _ := w.cache.Pool(p.Name)
				if Fits(&cur, r, testNow).Code == ReasonNone {
					fitting = append(fitting, cur)
				}
			}
			d := w.cache.ScheduleAndAssume(types.UID(fmt.Sprintf("m%d", i)), r, testNow, StrategySpread)
			if d.Pool == nil {
				if len(fitting) > 0 {
					t.Fatalf("left pending though %d pools fit", len(fitting))
				}
				continue
			}
			for i := range fitting {
				if untoleratedPreferences(&fitting[i], r) < untoleratedPreferences(d.Pool, r) {
					t.Fatalf("chose %s with %d untolerated PreferNoSchedule taints over %s with %d",
						d.Pool.Name, untoleratedPreferences(d.Pool, r), fitting[i].Name, untoleratedPreferences(&fitting[i], r))
				}
			}
		}
	})
}
