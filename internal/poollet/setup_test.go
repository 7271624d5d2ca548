package poollet_test

import (
	"context"
	"fmt"
	"github.com/anvil-dev/anvil/internal/events"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// poolLabel marks each test's pools, so a test's Machines select its own pools only.
const poolLabel = "anvil.dev/test-pool"

const testImage = "registry.example/testos@sha256:1111111111111111111111111111111111111111111111111111111111111111"

// testPool is a fake runtime on a unix socket and a poollet for it; either can be
// stopped and started again on the same state, as a crash and restart would.
type testPool struct {
	t      *testing.T
	name   string
	cfg    fake.Config
	labels map[string]string
	// restConfig is the poollet's identity; nil is the test's admin.
	restConfig *rest.Config
	// registries is how the poollet reads tags (the default: no non-public registry).
	registries registrynet.Policy
	// imageFolders holds Machines' images on these registries to their namespaces.
	imageFolders []imageowner.Folders
	// maxOrphans overrides the poollet's default when not zero.
	maxOrphans int
	// stuckAfter overrides the tests' one second when not zero.
	stuckAfter time.Duration
	// interval overrides the tests' half second between reads of the runtime when not zero.
	interval time.Duration
	// consoleAddress is the poollet's ConsoleAddress (none when empty).
	consoleAddress string
	endpoint       string
	rt             *fake.Runtime
	client         mriv1alpha1.MachineRuntimeClient
	stopRT         context.CancelFunc
	rtDone         chan error
	stopPL         context.CancelFunc
	plDone         chan error
}

func newPool(t *testing.T, name string, mutate func(*fake.Config)) *testPool {
	t.Helper()
	return newPoolWithLabels(t, name, nil, mutate)
}

// newPoolWithLabels adds labels to the pool, beyond its own poolLabel.
func newPoolWithLabels(t *testing.T, name string, labels map[string]string, mutate func(*fake.Config)) *testPool {
	t.Helper()
	return startPool(t, &testPool{t: t, name: name, labels: labels}, mutate)
}

// startPool fills in p's runtime and starts it and its poollet.
func startPool(t *testing.T, p *testPool, mutate func(*fake.Config)) *testPool {
	t.Helper()
	name := p.name
	dir := t.TempDir()
	p.endpoint = "unix://" + filepath.Join(dir, "mri.sock")
	p.cfg = fake.Config{
		Name:          name,
		Allocatable:   &mriv1alpha1.Resources{MilliCpu: 16000, MemoryBytes: 32 << 30},
		Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64},
		StateFile:     filepath.Join(dir, "state.json"),
	}
	if mutate != nil {
		mutate(&p.cfg)
	}
	c, conn, err := mri.Dial(p.endpoint, mri.Pool(name))
	if err != nil {
		t.Fatal(err)
	}
	p.client = c
	p.startRuntime()
	p.startPoollet()
	t.Cleanup(func() {
		p.stopPoollet()
		p.stopRuntime()
		conn.Close()
	})
	return p
}

func (p *testPool) startRuntime() {
	rt, err := fake.New(p.cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	l, err := mri.Listen(p.endpoint)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.rt, p.stopRT, p.rtDone = rt, cancel, make(chan error, 1)
	go func() { p.rtDone <- mri.ServeListener(ctx, l, rt, mri.Pool(p.cfg.Name)) }()
}

func (p *testPool) stopRuntime() {
	if p.stopRT == nil {
		return
	}
	p.stopRT()
	p.rt.Close()
	<-p.rtDone
	p.stopRT = nil
}

func (p *testPool) startPoollet() {
	o := poollet.DefaultOptions(p.name)
	o.Runtime, o.Interval, o.LeaseDuration, o.StuckAfter = p.client, 500*time.Millisecond, 10*time.Second, time.Second
	o.SkipControllerNameValidation = true
	o.Images = poollet.NewRegistryImages(p.registries)
	o.ImageFolders = p.imageFolders
	if p.maxOrphans != 0 {
		o.MaxOrphans = p.maxOrphans
	}
	if p.stuckAfter != 0 {
		o.StuckAfter = p.stuckAfter
	}
	if p.interval != 0 {
		o.Interval = p.interval
	}
	o.ConsoleAddress = p.consoleAddress
	o.Labels = map[string]string{poolLabel: p.name}
	for k, v := range p.labels {
		o.Labels[k] = v
	}
	cfg := env.Config
	if p.restConfig != nil {
		cfg = p.restConfig
	}
	mgr, err := poollet.New(cfg, o)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stopPL, p.plDone = cancel, make(chan error, 1)
	go func() { p.plDone <- mgr.Start(ctx) }()
}

func (p *testPool) stopPoollet() {
	if p.stopPL == nil {
		return
	}
	p.stopPL()
	if err := <-p.plDone; err != nil {
		p.t.Errorf("poollet %s: %v", p.name, err)
	}
	p.stopPL = nil
}

// runtimeMachines lists the runtime's machines of one Machine object.
func (p *testPool) runtimeMachines(m *computev1alpha1.Machine) []*mriv1alpha1.Machine {
	p.t.Helper()
	resp, err := p.client.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{
		LabelSelector: map[string]string{mri.LabelMachineUID: string(m.UID)}})
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.Machines
}

var managerStarted bool

// startControllers runs anvil's controller manager (the scheduler among them) once for
// the package.
func startControllers(t *testing.T) {
	t.Helper()
	if managerStarted {
		return
	}
	managerStarted = true
	// The package's tests write far more Events in one process than a manager and a
	// poollet do, and check them: no drops.
	events.SetProcessLimit(10000, 100000)
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr = "0", "0"
	o.ImageArchitectures = manager.ImageArchitecturesAny // the tests' images name no real registry
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Start(ctx); close(done) }()
	env.BeforeStop(func() { cancel(); <-done })
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "huge"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("12"), "memory": resource.MustParse("4Gi")}},
	} {
		if err := env.Client.Create(context.Background(), obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// newMachine creates a Machine that may go to the named pool only.
func newMachine(t *testing.T, pool, name string, mutate func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	t.Helper()
	ns := "ns-" + pool
	_ = env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: testImage,
			MachinePoolSelector: map[string]string{poolLabel: pool}},
	}
	if mutate != nil {
		mutate(m)
	}
	if err := env.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFor polls the Machine until cond holds; gone Machines are passed as nil.
func waitFor(t *testing.T, m *computev1alpha1.Machine, what string, cond func(*computev1alpha1.Machine) bool) *computev1alpha1.Machine {
	t.Helper()
	var last *computev1alpha1.Machine
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return false, err
			}
			cur = nil
		}
		last = cur
		return cond(cur), nil
	})
	if err != nil {
		desc := "gone"
		if last != nil {
			desc = fmt.Sprintf("spec %+v status %+v", last.Spec, last.Status)
		}
		t.Fatalf("Machine %s/%s never %s; last: %s", m.Namespace, m.Name, what, desc)
	}
	return last
}

func inState(s computev1alpha1.MachineState) func(*computev1alpha1.Machine) bool {
	return func(m *computev1alpha1.Machine) bool {
		return m != nil && m.Status.State == s && m.Status.ObservedGeneration == m.Generation
	}
}

func isGone(m *computev1alpha1.Machine) bool { return m == nil }

func setPower(t *testing.T, m *computev1alpha1.Machine, p computev1alpha1.Power) {
	t.Helper()
	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Power = p
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}
