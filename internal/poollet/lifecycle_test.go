package poollet_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

func TestMachineLifecycle(t *testing.T) {
	startControllers(t)
	p := newPool(t, "life", nil)
	m := newMachine(t, "life", "vm", nil)
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	if m.Status.MachineID == "" || m.Status.Pool != "life" || m.Status.Architecture != "amd64" || len(m.Status.Addresses) == 0 {
		t.Errorf("running Machine's status lacks id, pool, architecture or address: %+v", m.Status)
	}
	if img := m.Status.Image; img == nil || img.Reference != m.Spec.Image || img.Digest == "" {
		t.Errorf("status.image %+v does not record spec.image %s and the digest it resolved to", img, m.Spec.Image)
	}
	// These poollets serve no console endpoint: the Machine says so, not where a file is.
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionConsoleAvailable); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != computev1alpha1.ReasonPoolServesNoConsoles {
		t.Errorf("ConsoleAvailable %+v, want False, %s", c, computev1alpha1.ReasonPoolServesNoConsoles)
	}
	if !meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionReady) ||
		!meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionScheduled) {
		t.Errorf("running Machine not Ready and Scheduled: %+v", m.Status.Conditions)
	}
	setPower(t, m, computev1alpha1.PowerOff)
	waitFor(t, m, "shut down", inState(computev1alpha1.MachineStateShutdown))
	setPower(t, m, computev1alpha1.PowerOn)
	waitFor(t, m, "ran again", inState(computev1alpha1.MachineStateRunning))

	// A reboot request is carried out once per token.
	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{computev1alpha1.AnnotationReboot: "t1"}
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	waitRuntime(t, p, m, "rebooted with t1", func(rm *mriv1alpha1.Machine) bool { return rm.Status.RebootToken == "t1" })
	// ...and the Machine says so: whoever asked (a remediation, a broker upstream) reads
	// that its reboot was done.
	waitFor(t, m, "reported the reboot t1 done", func(m *computev1alpha1.Machine) bool { return m != nil && m.Status.RebootToken == "t1" })

	if err := env.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "went away", isGone)
	if left := p.runtimeMachines(m); len(left) != 0 {
		t.Fatalf("the runtime still has %d machines of the deleted Machine", len(left))
	}
	// What a person reads with kubectl get events: each reason first seen in this order,
	// Started twice (two Events, or one the events API folded into a series of two), after
	// whatever kept it from a pool while the test's pool was still starting (Unschedulable).
	// Scheduled and Created come from two processes: the scheduler stamps its Event after
	// the bind's write returns, and on a loaded machine the poollet has by then created the
	// runtime machine and stamped Created, so those two may appear in either order.
	wants := []string{"Scheduled:1 Created:1 Started:2 PoweredOff:1 Deleted:1", "Created:1 Scheduled:1 Started:2 PoweredOff:1 Deleted:1"}
	var got string
	matches := func() bool { return strings.HasSuffix(got, wants[0]) || strings.HasSuffix(got, wants[1]) }
	defer func() {
		if !matches() {
			t.Logf("events: %s", got)
		}
	}()
	waitFor(t, m, "left its Events", func(*computev1alpha1.Machine) bool { got = eventSummary(t, m); return matches() })
}

func waitRuntime(t *testing.T, p *testPool, m *computev1alpha1.Machine, what string, cond func(*mriv1alpha1.Machine) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, rm := range p.runtimeMachines(m) {
			if cond(rm) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("runtime machine of %s never %s: %v", m.Name, what, p.runtimeMachines(m))
}

// The runtime restarts while machines are still booting: they come up, once each.
func TestRuntimeRestartMidCreation(t *testing.T) {
	startControllers(t)
	p := newPool(t, "rt-restart", func(c *fake.Config) { c.Latency = 2 * time.Second })
	m := newMachine(t, "rt-restart", "vm", nil)
	waitRuntime(t, p, m, "created", func(*mriv1alpha1.Machine) bool { return true })
	p.stopRuntime()
	p.startRuntime()
	waitFor(t, m, "ran after the runtime restart", inState(computev1alpha1.MachineStateRunning))
	if n := len(p.runtimeMachines(m)); n != 1 {
		t.Fatalf("%d runtime machines for one Machine after the restart", n)
	}
}

// The poollet dies mid-flight and comes back: nothing is duplicated, and work done
// while it was away (a power change) is carried out.
func TestPoolletRestartMidFlight(t *testing.T) {
	startControllers(t)
	p := newPool(t, "pl-restart", func(c *fake.Config) { c.Latency = 300 * time.Millisecond })
	m := newMachine(t, "pl-restart", "vm", nil)
	waitRuntime(t, p, m, "created", func(*mriv1alpha1.Machine) bool { return true })
	p.stopPoollet()
	setPower(t, m, computev1alpha1.PowerOff)
	p.startPoollet()
	waitFor(t, m, "shut down after the poollet came back", inState(computev1alpha1.MachineStateShutdown))
	if n := len(p.runtimeMachines(m)); n != 1 {
		t.Fatalf("%d runtime machines for one Machine", n)
	}
}

// A Machine deleted while its runtime is down is cleaned up when the runtime returns.
func TestDeleteWhileRuntimeDown(t *testing.T) {
	startControllers(t)
	p := newPool(t, "rt-down", nil)
	m := newMachine(t, "rt-down", "vm", nil)
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	p.stopRuntime()
	if err := env.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if still := waitFor(t, m, "still held by its finalizer", func(m *computev1alpha1.Machine) bool { return m != nil }); still.DeletionTimestamp.IsZero() {
		t.Fatal("Machine not marked deleted")
	}
	p.startRuntime()
	waitFor(t, m, "went away once the runtime returned", isGone)
	if n := len(p.runtimeMachines(m)); n != 0 {
		t.Fatalf("%d runtime machines left", n)
	}
}

// A tag on a registry is resolved by the poollet to the digest the runtime gets.
func TestTagResolvedThroughTheRegistry(t *testing.T) {
	startControllers(t)
	ref, digest, registries := imageOnRegistry(t, "/anvil/testos:latest")
	p := startPool(t, &testPool{t: t, name: "tags", registries: registries}, nil)
	m := newMachine(t, "tags", "vm", func(m *computev1alpha1.Machine) { m.Spec.Image = ref })
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	waitRuntime(t, p, m, "booting the tag's digest", func(rm *mriv1alpha1.Machine) bool {
		return rm.Spec.Image.GetDigest() == digest && rm.Spec.Image.GetReference() == ref
	})

	missing := newMachine(t, "tags", "missing", func(m *computev1alpha1.Machine) { m.Spec.Image = strings.Split(ref, "/")[0] + "/anvil/absent:1" })
	waitFor(t, missing, "said its image cannot be resolved", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageReady)
		return c != nil && c.Reason == computev1alpha1.ReasonImageResolveFailed
	})
}

// imageOnRegistry starts a registry on loopback for the test, pushes a random image to
// repository:tag (path, from its first slash) on it, and returns the tag's reference, the
// image's digest, and the address policy that lets a poollet read that registry.
func imageOnRegistry(t *testing.T, path string) (string, string, registrynet.Policy) {
	t.Helper()
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + path
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	allow, err := registrynet.ParseAllowed(reg.Host) // the test's registry, on loopback
	if err != nil {
		t.Fatal(err)
	}
	return ref, digest.String(), registrynet.Policy{Allow: []registrynet.Allowed{allow}}
}

// A machine that finishes its deletion while the poollet's event stream is down sends no
// DELETED event, and the reopened stream lists only what is left: the Machine still goes.
// (A broker restarted while its site finished deleting held a region's Machines by their
// finalizer for good.) The runtime restarted on an empty state file stands for that site.
func TestMachineGoneWhileEventStreamDown(t *testing.T) {
	startControllers(t)
	p := newPool(t, "gone-while-down", func(c *fake.Config) { c.Latency = 5 * time.Second })
	m := newMachine(t, "gone-while-down", "vm", nil)
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	if err := env.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitRuntime(t, p, m, "being deleted", func(rm *mriv1alpha1.Machine) bool { return rm.GetMetadata().GetDeletedAtUnixNano() != 0 })
	p.stopRuntime()
	p.cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
	p.startRuntime()
	waitFor(t, m, "gone once its runtime machine is", isGone)
}
