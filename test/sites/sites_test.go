package sites

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

func TestMain(m *testing.M) {
	// Envtest logs through controller-runtime; the processes' logs are in their files.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestThreeLevels runs region → site → host: a Machine created in the region crosses two
// brokers to the host's fake pool, the host's capacity shows in the region's pool, and a
// delete in the region clears both levels below.
func TestThreeLevels(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sites")
	if err != nil {
		t.Fatal(err)
	}
	anvil, err := BuildAnvil(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A short interval: every level's pool follows its runtime's capacity within a second
	// or two, so the test waits on it briefly (it asserts no time).
	h, err := Start(ctx, Options{Levels: []string{"region", "site", "host"}, Anvil: anvil, Dir: dir,
		PoolletArgs: []string{"--interval", "1s"}})
	if err != nil {
		t.Fatalf("%v (logs in %s)", err, dir)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("the processes' logs are in %s", dir)
		}
	})
	region, site, host := h.Levels[0], h.Levels[1], h.Levels[2]
	// Scale runs read every process's CPU time: each level's five are found.
	cpu, err := h.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpu) != 15 {
		t.Errorf("CPU times of %d processes, want 15 (5 per level): %v", len(cpu), cpu)
	}

	// Capacity: the region's pool offers what the host's fake pool has.
	hostPool, err := host.MachinePool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hostCPU := hostPool.Status.Allocatable.Cpu().Value()
	if hostCPU != 64 {
		t.Fatalf("host pool %s allocatable cpu %d, want 64 (the fake runtime's)", host.Pool, hostCPU)
	}
	h.eventually(t, "the region's pool offering the host's cpu", func() (bool, string) {
		p, err := region.MachinePool(ctx)
		if err != nil {
			return false, err.Error()
		}
		got := p.Status.Allocatable.Cpu().Value()
		return got == hostCPU, fmt.Sprintf("region pool %s allocatable cpu %d", region.Pool, got)
	})

	// A Machine with a first-boot Secret, created in the region.
	const tenant = "tenant"
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "boot"},
		StringData: map[string]string{computev1alpha1.DefaultIgnitionKey: `{"ignition":{"version":"3.4.0"}}`}}
	m := h.Machine(tenant, "web")
	m.Spec.IgnitionRef = &computev1alpha1.SecretKeySelector{Name: boot.Name}
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, boot, m} {
		if err := region.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually(t, "the region's Machine Running", func() (bool, string) {
		got := &computev1alpha1.Machine{}
		if err := region.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			return false, err.Error()
		}
		return got.Status.State == computev1alpha1.MachineStateRunning, "state " + string(got.Status.State)
	})

	// Exactly one Machine per level below, each made by the broker above for the Machine
	// above it, the last on the host's fake pool.
	siteMachine := onlyMachine(t, ctx, site, region.Pool, string(mustGet(t, ctx, region, m).UID))
	if ref := siteMachine.Spec.MachinePoolRef; ref == nil || ref.Name != site.Pool {
		t.Errorf("the site's Machine is bound to %v, want the site's broker pool %s", ref, site.Pool)
	}
	hostMachine := onlyMachine(t, ctx, host, site.Pool, string(siteMachine.UID))
	if ref := hostMachine.Spec.MachinePoolRef; ref == nil || ref.Name != host.Pool {
		t.Errorf("the host's Machine is bound to %v, want the fake pool %s", ref, host.Pool)
	}
	for _, lm := range []struct {
		l *Level
		m *computev1alpha1.Machine
	}{{site, siteMachine}, {host, hostMachine}} {
		if lm.m.Status.State != computev1alpha1.MachineStateRunning {
			t.Errorf("level %s: Machine %s is %s, want Running", lm.l.Name, lm.m.Name, lm.m.Status.State)
		}
		if n := len(brokerSecrets(t, ctx, lm.l)); n != 1 {
			t.Errorf("level %s: %d first-boot Secrets of the broker above, want 1", lm.l.Name, n)
		}
	}

	// A Machine made in the host directly takes a cpu from everyone above: the region's
	// pool reports one less.
	direct := h.Machine("direct", "local")
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "direct"}}, direct} {
		if err := host.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually(t, "the region's pool offering one cpu less", func() (bool, string) {
		p, err := region.MachinePool(ctx)
		if err != nil {
			return false, err.Error()
		}
		got := p.Status.Allocatable.Cpu().Value()
		return got == hostCPU-1, fmt.Sprintf("region pool %s allocatable cpu %d", region.Pool, got)
	})

	// Delete in the region: gone there means gone below (a broker reports a machine gone
	// only when the Machine below is); the Secrets follow.
	if err := region.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	h.eventually(t, "the region's Machine gone", func() (bool, string) {
		err := region.Client.Get(ctx, client.ObjectKeyFromObject(m), &computev1alpha1.Machine{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("get: %v", err)
	})
	for _, l := range []*Level{site, host} {
		ms, err := l.Machines(ctx, l.BrokerNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 0 {
			t.Errorf("level %s: %d Machines left in %s after the region's is gone", l.Name, len(ms), l.BrokerNamespace)
		}
		h.eventually(t, "level "+l.Name+"'s first-boot Secrets gone", func() (bool, string) {
			n := len(brokerSecrets(t, ctx, l))
			return n == 0, fmt.Sprintf("%d left", n)
		})
	}
}

// onlyMachine is the one Machine in l's broker namespace, checked to be the broker of
// pool's, made for the Machine above of uid.
func onlyMachine(t *testing.T, ctx context.Context, l *Level, pool, uid string) *computev1alpha1.Machine {
	t.Helper()
	ms, err := l.Machines(ctx, l.BrokerNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("level %s: %d Machines in %s, want exactly 1", l.Name, len(ms), l.BrokerNamespace)
	}
	m := &ms[0]
	if got := m.Labels[mapping.LabelPool]; got != pool {
		t.Errorf("level %s: Machine %s made by the broker of pool %q, want %q", l.Name, m.Name, got, pool)
	}
	if got := m.Labels[mapping.LabelUpstreamUID]; got != uid {
		t.Errorf("level %s: Machine %s made for upstream uid %q, want %q", l.Name, m.Name, got, uid)
	}
	return m
}

// brokerSecrets are the Secrets the broker above made in l.
func brokerSecrets(t *testing.T, ctx context.Context, l *Level) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := l.Client.List(ctx, list, client.InNamespace(l.BrokerNamespace), client.HasLabels{mapping.LabelPool}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func mustGet(t *testing.T, ctx context.Context, l *Level, m *computev1alpha1.Machine) *computev1alpha1.Machine {
	t.Helper()
	got := &computev1alpha1.Machine{}
	if err := l.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// eventually waits for cond, failing with its last word after a minute or as soon as one
// of the hierarchy's processes has died.
func (h *Hierarchy) eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if dead := h.Exited(); len(dead) > 0 {
			t.Fatalf("waiting for %s: processes %v ended (last: %s)", what, dead, last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after a minute (last: %s)", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
