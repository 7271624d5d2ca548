package poollet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// Pool "full" has room by its status but its runtime is taken by a machine anvil does not
// know of: the runtime refuses, and the scheduler moves the Machine to pool "spare".
func TestRefusalHandsMachineBackToScheduler(t *testing.T) {
	startControllers(t)
	small := func(c *fake.Config) { c.Allocatable = &mriv1alpha1.Resources{MilliCpu: 2000, MemoryBytes: 64 << 30} }
	full := newPoolWithLabels(t, "refusing", map[string]string{"group": "refusal"}, small)
	newPoolWithLabels(t, "spare", map[string]string{"group": "refusal"},
		func(c *fake.Config) { c.Allocatable = &mriv1alpha1.Resources{MilliCpu: 1500, MemoryBytes: 64 << 30} })
	_, err := full.client.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: "outsider"}},
		Spec: &mriv1alpha1.MachineSpec{Resources: &mriv1alpha1.Resources{MilliCpu: 1500, MemoryBytes: 1 << 30},
			Image: &mriv1alpha1.Image{Reference: "registry.example/outsider:1", Digest: "sha256:x"}, Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
			Power: mriv1alpha1.Power_POWER_ON}}})
	if err != nil {
		t.Fatal(err)
	}
	// Spread prefers "refusing" (more free cpu by its status); its runtime says no.
	m := newMachine(t, "refusing", "vm", func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolSelector = map[string]string{"group": "refusal"}
	})
	m = waitFor(t, m, "ran on the spare pool", func(m *computev1alpha1.Machine) bool {
		return m != nil && m.Status.State == computev1alpha1.MachineStateRunning && m.Status.Pool == "spare"
	})
	if n := len(full.runtimeMachines(m)); n != 0 {
		t.Fatalf("the refusing runtime holds %d machines of the Machine", n)
	}
}

// A Machine its user pinned stays on its pool when refused, and says why.
func TestPinnedMachineRefusedSaysWhy(t *testing.T) {
	startControllers(t)
	newPool(t, "pinned", nil)
	m := newMachine(t, "pinned", "too-big", func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "pinned"}
		m.Spec.MachineClassRef.Name = "huge"
	})
	// Two of "huge" (12 cpu) do not fit 16 cpu.
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	second := newMachine(t, "pinned", "too-big-2", func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "pinned"}
		m.Spec.MachineClassRef.Name = "huge"
	})
	waitFor(t, second, "said the runtime refused it", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Reason == computev1alpha1.ReasonRuntimeRefused && strings.Contains(c.Message, "not enough cpu") &&
			m.Spec.MachinePoolRef != nil && m.Spec.MachinePoolRef.Name == "pinned"
	})
}

func TestMissingSecretIsACondition(t *testing.T) {
	startControllers(t)
	p := newPool(t, "secrets", nil)
	m := newMachine(t, "secrets", "vm", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "user-data"}
	})
	waitFor(t, m, "reported the missing Secret", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionIgnitionReady)
		return c != nil && c.Reason == computev1alpha1.ReasonSecretNotFound && strings.Contains(c.Message, "Secret user-data")
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: "user-data"},
		Data: map[string][]byte{computev1alpha1.DefaultUserDataKey: []byte("#cloud-config\nhostname: vm\n")}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	// Nothing watches Secrets: the Machine is retried on its own schedule.
	m = waitFor(t, m, "ran once the Secret exists", inState(computev1alpha1.MachineStateRunning))
	if !meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionIgnitionReady) {
		t.Errorf("IgnitionReady still false once running: %+v", m.Status.Conditions)
	}
	waitRuntime(t, p, m, "got the user data", func(rm *mriv1alpha1.Machine) bool {
		return rm.Spec.FirstBoot.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT &&
			strings.Contains(string(rm.Spec.FirstBoot.GetData()), "hostname: vm")
	})
}

func TestDuplicateRuntimeMachinesAreCleanedUp(t *testing.T) {
	startControllers(t)
	p := newPool(t, "dups", nil)
	m := newMachine(t, "dups", "vm", nil)
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	// Another writer (a poollet from before a crash, say) made a second machine for the uid.
	dup := p.runtimeMachines(m)[0]
	p.stopRuntime()
	injectDuplicate(t, p, dup)
	p.startRuntime()
	waitRuntime(t, p, m, "down to one machine", func(*mriv1alpha1.Machine) bool { return len(p.runtimeMachines(m)) == 1 })
	if got := p.runtimeMachines(m)[0].Metadata.Id; got != m.Status.MachineID {
		t.Fatalf("kept %s, want the original %s", got, m.Status.MachineID)
	}
}

// injectDuplicate adds a copy of rm, under a new id, to the stopped runtime's state.
func injectDuplicate(t *testing.T, p *testPool, rm *mriv1alpha1.Machine) {
	t.Helper()
	raw, err := os.ReadFile(p.cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	state := &mriv1alpha1.ListMachinesResponse{}
	if err := protojson.Unmarshal(raw, state); err != nil {
		t.Fatal(err)
	}
	dup := proto.Clone(rm).(*mriv1alpha1.Machine)
	dup.Metadata.Id = p.name + "-999"
	dup.Metadata.CreatedAtUnixNano = rm.Metadata.CreatedAtUnixNano + 1
	state.Machines = append(state.Machines, dup)
	if raw, err = protojson.Marshal(state); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.cfg.StateFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidIgnitionIsACondition(t *testing.T) {
	startControllers(t)
	p := newPool(t, "ignition", nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-ignition", Name: "ign"},
		Data: map[string][]byte{computev1alpha1.DefaultIgnitionKey: []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"relative"}]}}`)}}
	m := newMachine(t, "ignition", "vm", func(m *computev1alpha1.Machine) {
		m.Spec.IgnitionRef = &computev1alpha1.SecretKeySelector{Name: "ign"}
	})
	if err := env.Client.Create(context.Background(), secret); err != nil { // after newMachine made the namespace
		t.Fatal(err)
	}
	waitFor(t, m, "reported the invalid config", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionIgnitionReady)
		return c != nil && c.Reason == computev1alpha1.ReasonIgnitionInvalid && strings.Contains(c.Message, "Secret ign")
	})
	if got := p.runtimeMachines(m); len(got) != 0 {
		t.Fatalf("the runtime got %d machines for an invalid config", len(got))
	}
	valid := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,vm"}}]}}`
	secret.Data[computev1alpha1.DefaultIgnitionKey] = []byte(valid)
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "ran once the config is valid", inState(computev1alpha1.MachineStateRunning))
	waitRuntime(t, p, m, "got the Ignition config", func(rm *mriv1alpha1.Machine) bool {
		return rm.Spec.FirstBoot.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION && string(rm.Spec.FirstBoot.GetData()) == valid
	})
}

// A tenant's Ignition Secret of many thousands of errors (a few hundred KiB) is reported on
// the Machine like any invalid config. Ignition's full report of it ran for many seconds in
// the poollet and was megabytes long, more than a condition's message may hold, so the
// status write was refused and the Machine never said why it did not run.
func TestIgnitionOfThousandsOfErrorsIsACondition(t *testing.T) {
	startControllers(t)
	p := newPool(t, "ignition-errors", nil)
	files := make([]string, 20000)
	for i := range files {
		files[i] = `{"path":"r"}`
	}
	config := `{"ignition":{"version":"3.4.0"},"storage":{"files":[` + strings.Join(files, ",") + `]}}`
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-ignition-errors", Name: "ign"},
		Data: map[string][]byte{computev1alpha1.DefaultIgnitionKey: []byte(config)}}
	m := newMachine(t, "ignition-errors", "vm", func(m *computev1alpha1.Machine) {
		m.Spec.IgnitionRef = &computev1alpha1.SecretKeySelector{Name: "ign"}
	})
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "reported the invalid config", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionIgnitionReady)
		return c != nil && c.Reason == computev1alpha1.ReasonIgnitionInvalid && strings.Contains(c.Message, "more errors")
	})
	if got := p.runtimeMachines(m); len(got) != 0 {
		t.Fatalf("the runtime got %d machines for an invalid config", len(got))
	}
}

// Defence in depth: a Machine bound to a pool without the scheduler (by a holder of bind)
// whose tenant policy leaves its namespace out, or whose taint it does not tolerate, is
// not created by the poollet; it says why. Once the pool admits it, it runs.
func TestPoolletRechecksTenantsAndTaints(t *testing.T) {
	ctx := context.Background()
	startControllers(t)
	p := newPool(t, "guarded", nil)
	mp := &computev1alpha1.MachinePool{}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: p.name}, mp)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("the poollet did not create pool %s: %v", p.name, err)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Tenants = &computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}
	mp.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gold", Effect: corev1.TaintEffectNoSchedule}}
	if err := env.Client.Patch(ctx, mp, patch); err != nil {
		t.Fatal(err)
	}
	refusedFor := func(why string) func(*computev1alpha1.Machine) bool {
		return func(m *computev1alpha1.Machine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
			return c != nil && c.Reason == computev1alpha1.ReasonRuntimeRefused && strings.Contains(c.Message, "does not admit") &&
				strings.Contains(c.Message, why)
		}
	}
	m := newMachine(t, "guarded", "bound-by-hand", func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: p.name}
	})
	waitFor(t, m, "refused for its namespace", refusedFor("tenant policy"))
	if n := len(p.runtimeMachines(m)); n != 0 {
		t.Fatalf("the runtime holds %d machines of a Machine the pool does not admit", n)
	}

	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: m.Namespace}, ns); err != nil {
		t.Fatal(err)
	}
	nsPatch := client.MergeFrom(ns.DeepCopy())
	ns.Labels = map[string]string{"tier": "gold"}
	if err := env.Client.Patch(ctx, ns, nsPatch); err != nil {
		t.Fatal(err)
	}
	touch(t, m) // the poollet does not watch namespaces: a change of the Machine wakes it
	waitFor(t, m, "refused for the taint", refusedFor("taint"))
	if n := len(p.runtimeMachines(m)); n != 0 {
		t.Fatalf("the runtime holds %d machines of a Machine that does not tolerate the pool's taint", n)
	}

	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	mPatch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gold", Effect: corev1.TaintEffectNoSchedule}}
	if err := env.Client.Patch(ctx, cur, mPatch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "ran once admitted", inState(computev1alpha1.MachineStateRunning))
}

// touch changes an annotation of m, so its controllers look at it again.
func touch(t *testing.T, m *computev1alpha1.Machine) {
	t.Helper()
	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["test.anvil.dev/touched"] = time.Now().String()
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}

// The attack (or the typo): a poollet started with another pool's name is pointed at a
// runtime's socket. Its cache holds only Machines bound to its own pool, so the runtime's
// machines look like the garbage of Machines that are gone. The runtime names the pool it
// serves (MRI rule I5) and the poollet refuses it before any call: its pool says
// WrongRuntime, and the other pool's machine keeps running.
func TestPoolletOfAnotherPoolDeletesNothing(t *testing.T) {
	ctx := context.Background()
	startControllers(t)
	real := newPool(t, "victim", nil)
	m := newMachine(t, "victim", "precious", func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: real.name}
	})
	waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))

	typo := &testPool{t: t, name: "victim-typo", endpoint: real.endpoint}
	c, conn, err := mri.Dial(real.endpoint, mri.Pool(typo.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	typo.client = c
	typo.startPoollet()
	t.Cleanup(typo.stopPoollet)

	// The runtime's event stream is offered to the wrong poollet for a few heartbeats.
	time.Sleep(3 * time.Second)
	if n := len(real.runtimeMachines(m)); n != 1 {
		t.Fatalf("the victim's runtime holds %d machines of its Machine, want 1", n)
	}
	mp := &computev1alpha1.MachinePool{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: typo.name}, mp); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		c := meta.FindStatusCondition(mp.Status.Conditions, computev1alpha1.ConditionReady)
		return c != nil && c.Reason == computev1alpha1.ReasonWrongRuntime && strings.Contains(c.Message, "serves pool victim,"), nil
	})
	if err != nil {
		t.Fatalf("pool %s never said its runtime serves another pool: %+v", typo.name, mp.Status.Conditions)
	}
	waitFor(t, m, "still running", inState(computev1alpha1.MachineStateRunning))
}

// Many runtime machines without a Machine of the pool at once (a Machine list from the
// wrong place, a wrong runtime): the poollet deletes none of them and says so on the pool;
// once they are few again (an operator removed some), it deletes the rest.
func TestTooManyOrphansAreKept(t *testing.T) {
	ctx := context.Background()
	startControllers(t)
	p := startPool(t, &testPool{t: t, name: "orphans", maxOrphans: 2}, nil)
	var ids []string
	for i := 0; i < 3; i++ {
		rm, err := p.client.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: fmt.Sprintf("gone-%d", i),
				poollet.LabelMachineNamespace: "ns-orphans", poollet.LabelMachineName: fmt.Sprintf("gone-%d", i)}},
			Spec: &mriv1alpha1.MachineSpec{Resources: &mriv1alpha1.Resources{MilliCpu: 100, MemoryBytes: 1 << 20},
				Image: &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:x"}, Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
				Power: mriv1alpha1.Power_POWER_ON}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rm.GetMachine().GetMetadata().GetId())
	}
	count := func() int {
		list, err := p.client.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range list.GetMachines() {
			if m.GetMetadata().GetDeletedAtUnixNano() == 0 {
				n++
			}
		}
		return n
	}
	poolCondition := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			mp := &computev1alpha1.MachinePool{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: p.name}, mp); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			c := meta.FindStatusCondition(mp.Status.Conditions, computev1alpha1.ConditionOrphansHeld)
			return (c != nil && c.Reason == computev1alpha1.ReasonTooManyOrphans && strings.Contains(c.Message, "3 runtime machines")) == want, nil
		})
		if err != nil {
			t.Fatalf("pool %s never had OrphansHeld=%v", p.name, want)
		}
	}
	poolCondition(true)
	time.Sleep(3 * time.Second) // several intervals and retries of the poollet
	if n := count(); n != 3 {
		t.Fatalf("the poollet deleted %d of 3 orphans while there were too many", 3-n)
	}

	if _, err := p.client.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: ids[0]}); err != nil {
		t.Fatal(err)
	}
	poolCondition(false)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return count() == 0, nil
	}); err != nil {
		t.Fatalf("%d orphans left once they were few enough to delete", count())
	}
}
