package osimage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/testos"
)

// rig is anvil's controller manager (the OSImage controller among them, with no builders:
// a publication is what the test writes, as a build's would be) and fake pools with their
// poollets, each acting as its own pool's ServiceAccount, on the test's apiserver and
// registry; one OSImage whose output tag its Machines boot.
type rig struct {
	tb     testing.TB
	o      *imagesv1alpha1.OSImage
	tag    string
	testos string
	// created counts the Machines made by machines: a rollout counting fewer has not seen
	// them all yet (complete with none is no news).
	created int
}

func startRig(tb testing.TB, name string, rollout imagesv1alpha1.RolloutSpec, pools ...dev.FakePool) *rig {
	tb.Helper()
	// The pools' state lives in state: they must have stopped before it is removed, and
	// cleanups run last-registered first.
	state := tb.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stopped []<-chan struct{}
	tb.Cleanup(func() {
		cancel()
		for _, done := range stopped {
			<-done
		}
	})
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatal(err)
		}
	}
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	o.ImageArchitectures = manager.ImageArchitecturesAny
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		tb.Fatal(err)
	}
	harness.RunManager(tb, mgr)
	allow, err := registrynet.ParseAllowed(env.Registry.Host)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range pools {
		errs, err := dev.StartFakePool(ctx, env.Config, state, p, registrynet.Policy{Allow: []registrynet.Allowed{allow}})
		if err != nil {
			tb.Fatal(err)
		}
		done := make(chan struct{})
		stopped = append(stopped, done)
		go func() {
			defer close(done)
			for err := range errs {
				if ctx.Err() == nil {
					tb.Errorf("pool %s: %v", p.Name, err)
				}
			}
		}()
	}
	r := &rig{tb: tb, testos: testos.Dir(tb), tag: env.Registry.Host + "/default/" + name + ":1"}
	r.o = recipe(name, "unused")
	r.o.Spec.Rollout = &rollout
	if err := env.Client.Create(ctx, r.o); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = env.Client.Delete(context.Background(), r.o) })
	return r
}

// fakePool is a pool of the fake runtime for arch whose every step takes latency; images,
// when set, are the only index digests it finds (others are refused, as a missing image is).
func fakePool(name string, arch mriv1alpha1.Architecture, latency time.Duration, images ...string) dev.FakePool {
	cfg := fake.Config{Allocatable: &mriv1alpha1.Resources{MilliCpu: 1 << 20, MemoryBytes: 1 << 50},
		Architectures: []mriv1alpha1.Architecture{arch}, Latency: latency}
	if len(images) > 0 {
		cfg.Images = map[string][]mriv1alpha1.Architecture{}
		for _, d := range images {
			cfg.Images[d] = nil
		}
	}
	return dev.FakePool{Name: name, Config: cfg}
}

// index builds the test OS as an index with an entry per architecture, each marked with
// its version: an architecture whose version is the same in two indexes has the same
// entry in both.
func (r *rig) index(versions map[computev1alpha1.Architecture]string) (string, v1.ImageIndex) {
	r.tb.Helper()
	var images []v1.Image
	for arch, version := range versions {
		files, err := osimage.FromDir(arch, filepath.Join(r.testos, string(arch)))
		if err != nil {
			r.tb.Fatal(err)
		}
		files.Annotations = map[string]string{"version": version}
		img, err := osimage.Build(files)
		if err != nil {
			r.tb.Fatal(err)
		}
		images = append(images, img)
	}
	idx, err := osimage.Index(images...)
	if err != nil {
		r.tb.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		r.tb.Fatal(err)
	}
	return d.String(), idx
}

// publish does what a build's publication does: push the index, move the output tag, and
// write the index and its entries into the OSImage's status.
func (r *rig) publish(idx v1.ImageIndex) {
	r.tb.Helper()
	ctx := context.Background()
	digest, err := osimage.Push(ctx, r.tag, idx)
	if err != nil {
		r.tb.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		r.tb.Fatal(err)
	}
	var published []imagesv1alpha1.PublishedEntry
	for _, d := range m.Manifests {
		published = append(published, imagesv1alpha1.PublishedEntry{Architecture: computev1alpha1.Architecture(d.Platform.Architecture),
			Digest: d.Digest.String(), InputHash: d.Digest.Hex})
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r.o), r.o); err != nil {
			return err
		}
		r.o.Status.Index, r.o.Status.Published = digest, published
		return env.Client.Status().Update(ctx, r.o)
	}); err != nil {
		r.tb.Fatal(err)
	}
}

// setRollout changes spec.rollout.
func (r *rig) setRollout(change func(*imagesv1alpha1.RolloutSpec)) {
	r.tb.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.o), r.o); err != nil {
			return err
		}
		change(r.o.Spec.Rollout)
		return env.Client.Update(context.Background(), r.o)
	}); err != nil {
		r.tb.Fatal(err)
	}
}

// machines creates n Machines booting the tag, bound to pool, and returns their names.
func (r *rig) machines(pool string, n int) []string {
	r.tb.Helper()
	var names []string
	for i := range n {
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: fmt.Sprintf("%s-%03d", pool, i)},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: r.tag,
				MachinePoolRef: &computev1alpha1.LocalObjectReference{Name: pool}}}
		if err := env.Client.Create(context.Background(), m); err != nil {
			r.tb.Fatal(err)
		}
		r.tb.Cleanup(func() { _ = env.Client.Delete(context.Background(), m) })
		names = append(names, m.Name)
	}
	r.created += n
	return names
}

// status waits for the OSImage's RollingOut condition to have reason and the rollout to
// target index and count every Machine created, and returns the OSImage.
func (r *rig) status(index, reason string, limit time.Duration) *imagesv1alpha1.OSImage {
	r.tb.Helper()
	got := &imagesv1alpha1.OSImage{}
	deadline := time.Now().Add(limit)
	for {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.o), got); err != nil {
			r.tb.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, imagesv1alpha1.ConditionRollingOut)
		if c != nil && c.Reason == reason && got.Status.Rollout != nil && got.Status.Rollout.Target == index && int(got.Status.Rollout.Machines) == r.created {
			return got
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("OSImage %s: RollingOut %s on %s not within %s; last: %+v, rollout %+v; Machines: %s", r.o.Name, reason, index, limit, c, got.Status.Rollout, r.summary())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// summary says where each Machine of the tag is, for a failure's message.
func (r *rig) summary() string {
	list := &computev1alpha1.MachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(r.o.Namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, m := range list.Items {
		if m.Spec.Image != r.tag {
			continue
		}
		ready := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReady)
		reimaging := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging)
		out = append(out, fmt.Sprintf("%s %s ready=%v image=%v target=%q reimaging=%v", m.Name, m.Status.State, ready, m.Status.Image,
			m.Annotations[imagesv1alpha1.AnnotationRolloutTarget], reimaging))
	}
	return strings.Join(out, "; ")
}

// sampler follows the namespace's Machines through a watch and keeps, per pool, the most
// Machines of the rollout it saw unavailable at once: not Running and Ready, or asked to
// boot the target and not yet running it. It judges from what the API shows, not from the
// controller's own accounting.
type sampler struct {
	mu      sync.Mutex
	target  string
	down    map[string]map[string]bool // pool -> Machine -> unavailable
	highest map[string]int
	asked   map[string]bool // Machines ever asked for the target
}

func (r *rig) sample(ctx context.Context) *sampler {
	r.tb.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		r.tb.Fatal(err)
	}
	w, err := c.Watch(ctx, &computev1alpha1.MachineList{}, client.InNamespace(r.o.Namespace))
	if err != nil {
		r.tb.Fatal(err)
	}
	s := &sampler{down: map[string]map[string]bool{}, highest: map[string]int{}, asked: map[string]bool{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*computev1alpha1.Machine)
			if !ok || m.Spec.MachinePoolRef == nil {
				continue
			}
			s.observe(m, ev.Type == watch.Deleted)
		}
	}()
	return s
}

func (s *sampler) observe(m *computev1alpha1.Machine, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pool := m.Spec.MachinePoolRef.Name
	if s.down[pool] == nil {
		s.down[pool] = map[string]bool{}
	}
	asked := s.target != "" && strings.HasSuffix(m.Annotations[imagesv1alpha1.AnnotationRolloutTarget], "@"+s.target)
	if asked {
		s.asked[m.Name] = true
	}
	running := m.Status.State == computev1alpha1.MachineStateRunning && meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionReady)
	s.down[pool][m.Name] = !deleted && (!running || asked && (m.Status.Image == nil || m.Status.Image.Digest != s.target))
	n := 0
	for _, d := range s.down[pool] {
		if d {
			n++
		}
	}
	s.highest[pool] = max(s.highest[pool], n)
}

// retarget starts a new count for a rollout to target.
func (s *sampler) retarget(target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.highest, s.asked = target, map[string]int{}, map[string]bool{}
}

func (s *sampler) result() (highest map[string]int, asked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	highest = map[string]int{}
	for k, v := range s.highest {
		highest[k] = v
	}
	return highest, len(s.asked)
}

// The rollout end to end on fake pools: a new index moves the Machines booting the tag in
// waves, never more than maxUnavailable of a pool unavailable at once (sampled from a
// watch), each pool on its own budget; Machines whose architecture's entry did not change
// are never reimaged; paused holds it; a reimage the pool refuses stalls it, naming the
// Machine, and nothing more is asked.
func TestRolloutReimagesInWaves(t *testing.T) {
	ctx := context.Background()
	r := &rig{tb: t, testos: testos.Dir(t)}
	v1Index, v1 := r.index(map[computev1alpha1.Architecture]string{"amd64": "1", "arm64": "1"})
	v2Index, v2 := r.index(map[computev1alpha1.Architecture]string{"amd64": "2", "arm64": "1"})
	v3Index, v3 := r.index(map[computev1alpha1.Architecture]string{"amd64": "3", "arm64": "1"})
	// 34% is 2 of pool a's 6 Machines and 1 of pool b's 3 (rounded down, at least one).
	r = startRig(t, "waves", imagesv1alpha1.RolloutSpec{MaxUnavailable: ptrTo(intstr.FromString("34%"))},
		fakePool("waves-a", mriv1alpha1.Architecture_ARCHITECTURE_AMD64, 300*time.Millisecond),
		fakePool("waves-b", mriv1alpha1.Architecture_ARCHITECTURE_AMD64, 300*time.Millisecond, v1Index, v2Index),
		fakePool("waves-arm", mriv1alpha1.Architecture_ARCHITECTURE_ARM64, 300*time.Millisecond))
	limits := map[string]int{"waves-a": 2, "waves-b": 1, "waves-arm": 1}
	r.publish(v1)
	a, b, arm := r.machines("waves-a", 6), r.machines("waves-b", 3), r.machines("waves-arm", 2)
	o := r.status(v1Index, imagesv1alpha1.ReasonRolloutComplete, 60*time.Second)
	if got := *o.Status.Rollout; got.Machines != 11 || got.Updated != 11 {
		t.Fatalf("after the Machines booted the first index: %+v, want 11 Machines, all updated", got)
	}

	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	s := r.sample(watchCtx)

	// Paused: a new index asks no Machine.
	r.setRollout(func(s *imagesv1alpha1.RolloutSpec) { s.Paused = true })
	s.retarget(v2Index)
	r.publish(v2)
	o = r.status(v2Index, imagesv1alpha1.ReasonRolloutPaused, 30*time.Second)
	time.Sleep(2 * time.Second)
	if _, asked := s.result(); asked != 0 {
		t.Fatalf("paused, yet %d Machines were asked to reimage", asked)
	}
	if got := *r.status(v2Index, imagesv1alpha1.ReasonRolloutPaused, time.Second).Status.Rollout; got.Updated != 2 || got.Pending != 9 || got.Updating != 0 {
		t.Errorf("paused: %+v, want the 2 arm64 Machines updated (their entry did not change) and 9 pending", got)
	}

	// Unpaused: every amd64 Machine moves, in waves within each pool's budget.
	start := time.Now()
	r.setRollout(func(s *imagesv1alpha1.RolloutSpec) { s.Paused = false })
	r.status(v2Index, imagesv1alpha1.ReasonRolloutComplete, 60*time.Second)
	t.Logf("index 2 rolled out to 9 Machines in %s", time.Since(start).Round(10*time.Millisecond))
	highest, asked := s.result()
	for pool, limit := range limits {
		if highest[pool] > limit {
			t.Errorf("pool %s: %d Machines unavailable at once, past maxUnavailable %d", pool, highest[pool], limit)
		}
	}
	if highest["waves-a"] != 2 || asked != 9 {
		t.Errorf("pool waves-a saw at most %d unavailable and %d Machines were asked; want waves of 2 (its whole budget) and the 9 amd64 Machines", highest["waves-a"], asked)
	}
	for _, name := range append(append([]string{}, a...), b...) {
		m := getMachine(t, name)
		if m.Status.Image == nil || m.Status.Image.Digest != v2Index || m.Status.Image.Reference != r.tag || !meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionImageUpToDate) {
			t.Errorf("Machine %s after the rollout: image %+v, ImageUpToDate %+v; want %s@%s, current", name, m.Status.Image,
				meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageUpToDate), r.tag, v2Index)
		}
	}
	for _, name := range arm {
		m := getMachine(t, name)
		if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging); c != nil || m.Status.Image.Digest != v1Index {
			t.Errorf("arm64 Machine %s: Reimaging %+v, image %+v; want it never reimaged (its entry did not change), still on %s", name, c, m.Status.Image, v1Index)
		}
	}
	waitOSImageEvents(t, r.o, imagesv1alpha1.EventRolloutStarted, imagesv1alpha1.EventRolloutComplete)

	// Pool b cannot find index 3: its first Machine's reimage is refused, which stalls the
	// rollout everywhere, naming it.
	s.retarget(v3Index)
	r.publish(v3)
	o = r.status(v3Index, imagesv1alpha1.ReasonRolloutStalled, 30*time.Second)
	msg := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionRollingOut).Message
	if !strings.Contains(msg, "Machine "+b[0]+": its pool refused the new image") || !strings.Contains(msg, v3Index) {
		t.Errorf("stalled condition says %q, want it to name Machine %s, its refusal and the index", msg, b[0])
	}
	waitOSImageEvents(t, r.o, imagesv1alpha1.EventRolloutStalled)
	_, askedAtStall := s.result()
	time.Sleep(3 * time.Second)
	highest, asked = s.result()
	if asked != askedAtStall || asked > limits["waves-a"]+limits["waves-b"] {
		t.Errorf("stalled with %d Machines asked, %d after 3 s: want no more asked after the stall (at most the first wave of each pool)", askedAtStall, asked)
	}
	if got := r.status(v3Index, imagesv1alpha1.ReasonRolloutStalled, time.Second).Status.Rollout; got.Pending < 6 {
		t.Errorf("stalled: %+v, want the Machines not asked still pending", got)
	}
	for pool, limit := range limits {
		if highest[pool] > limit {
			t.Errorf("pool %s: %d Machines unavailable at once, past maxUnavailable %d", pool, highest[pool], limit)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func getMachine(t testing.TB, name string) *computev1alpha1.Machine {
	t.Helper()
	m := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitOSImageEvents waits for an Event of each reason about the OSImage.
func waitOSImageEvents(t *testing.T, o *imagesv1alpha1.OSImage, reasons ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("Events %v about OSImage %s", reasons, o.Name), func() (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client.List(context.Background(), events, client.InNamespace(o.Namespace)); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "OSImage" && e.InvolvedObject.Name == o.Name {
				seen[e.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, fmt.Sprint(seen)
			}
		}
		return true, ""
	})
}

// A Machine that does not come back within progressDeadlineSeconds stalls the rollout,
// though nothing about it changes in the meantime (the controller looks again at the
// deadline); once it is back on the new index the rollout goes on and completes.
func TestRolloutStallsPastTheDeadlineAndGoesOnWhenTheMachineIsBack(t *testing.T) {
	r := &rig{tb: t, testos: testos.Dir(t)}
	v1Index, v1 := r.index(map[computev1alpha1.Architecture]string{"amd64": "1"})
	v2Index, v2 := r.index(map[computev1alpha1.Architecture]string{"amd64": "2"})
	r = startRig(t, "deadline", imagesv1alpha1.RolloutSpec{MaxUnavailable: ptrTo(intstr.FromInt32(1)), ProgressDeadlineSeconds: ptrTo[int32](1)},
		fakePool("deadline", mriv1alpha1.Architecture_ARCHITECTURE_AMD64, 5*time.Second))
	r.publish(v1)
	names := r.machines("deadline", 2)
	r.status(v1Index, imagesv1alpha1.ReasonRolloutComplete, 60*time.Second)

	r.publish(v2)
	o := r.status(v2Index, imagesv1alpha1.ReasonRolloutStalled, 4*time.Second)
	msg := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionRollingOut).Message
	if !strings.Contains(msg, "Machine "+names[0]+" did not come back running the new image within 1s") {
		t.Errorf("stalled condition says %q, want it to name Machine %s and the deadline", msg, names[0])
	}
	if got := *o.Status.Rollout; got.Updating != 1 || got.Pending != 1 {
		t.Errorf("stalled: %+v, want the late Machine updating and the other pending", got)
	}
	o = r.status(v2Index, imagesv1alpha1.ReasonRolloutComplete, 60*time.Second)
	if got := *o.Status.Rollout; got.Updated != 2 {
		t.Errorf("after the Machine came back: %+v, want both updated", got)
	}
}
