package osimage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkRollout is the figure "rollout of 100 fake Machines with maxUnavailable 10%":
// each iteration publishes a new index for the Machines' architecture and times it from
// the publication to every Machine Ready on it (RollingOut Complete), while a watch counts
// the most Machines unavailable at once, which must never pass the limit (10 of 100). The
// fake runtime takes 200 ms per step, so each wave is visible. Everything runs in this
// process: apiserver, the controller manager, one pool's poollet and fake runtime.
//
//	go test -run '^$' -bench BenchmarkRollout -benchtime 3x ./internal/controller/osimage/
var benchRuns int

func BenchmarkRollout(b *testing.B) {
	const machines, limit = 100, 10
	// The framework calls this more than once (b.N 1, then as asked): each call is a pool of
	// its own, the earlier one's Machines still going away.
	benchRuns++
	name := fmt.Sprint("rollout-bench-", benchRuns)
	r := &rig{tb: b, testos: testos.Dir(b)}
	version := func(i int) string { return fmt.Sprint(i) }
	firstIndex, first := r.index(map[computev1alpha1.Architecture]string{"amd64": version(0)})
	r = startRig(b, name, imagesv1alpha1.RolloutSpec{MaxUnavailable: ptrTo(intstr.FromString("10%"))},
		fakePool(name, mriv1alpha1.Architecture_ARCHITECTURE_AMD64, 200*time.Millisecond))
	r.publish(first)
	r.machines(name, machines)
	r.status(firstIndex, imagesv1alpha1.ReasonRolloutComplete, 5*time.Minute)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := r.sample(ctx)
	var seconds float64
	highest := 0
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		index, idx := r.index(map[computev1alpha1.Architecture]string{"amd64": version(i)})
		s.retarget(index)
		b.StartTimer()
		start := time.Now()
		r.publish(idx)
		r.status(index, imagesv1alpha1.ReasonRolloutComplete, 5*time.Minute)
		took := time.Since(start)
		seconds += took.Seconds()
		h, asked := s.result()
		highest = max(highest, h[name])
		b.Logf("rollout %d: %d Machines asked, %.2f s, at most %d unavailable at once (limit %d)", i, asked, took.Seconds(), h[name], limit)
		if h[name] > limit || asked != machines {
			b.Fatalf("rollout %d: %d Machines unavailable at once (limit %d), %d asked (want %d)", i, h[name], limit, asked, machines)
		}
	}
	b.StopTimer()
	b.ReportMetric(seconds/float64(b.N), "s/rollout")
	b.ReportMetric(float64(highest), "max-unavailable")
	b.ReportMetric(limit, "limit")
}
