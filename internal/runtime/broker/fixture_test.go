package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
	"github.com/anvil-dev/anvil/test/harness"
)

// env is the downstream anvil: its API server, and (once downstream() ran) its
// controller manager and a fake pool with its poollet.
var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// downstreamPool is the downstream cluster's pool, of the fake runtime.
const downstreamPool = "site-fake"

var (
	downOnce sync.Once
	downErr  error
	images   map[string]*mriv1alpha1.Image
)

// downstream starts, once per test binary, the downstream manager (scheduler and the rest)
// and a fake pool of amd64 and arm64 with its poollet, creates the class "small", and
// pushes the test images: "os" and "os-2" (amd64), "arm-only" (arm64).
func downstream(t *testing.T) {
	t.Helper()
	downOnce.Do(func() { downErr = startDownstream() })
	if downErr != nil {
		t.Fatal(downErr)
	}
}

func startDownstream() error {
	ctx, cancel := context.WithCancel(context.Background())
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			cancel()
			return err
		}
	}
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	o.ImageArchitectures = manager.ImageArchitecturesAny
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		cancel()
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	state, err := os.MkdirTemp("", "anvil-broker-downstream-")
	if err != nil {
		cancel()
		return err
	}
	allow, err := registrynet.ParseAllowed(env.Registry.Host)
	if err != nil {
		cancel()
		return err
	}
	errs, err := dev.StartFakePool(ctx, env.Config, state, dev.FakePool{Name: downstreamPool, Config: fake.Config{
		Allocatable:   &mriv1alpha1.Resources{MilliCpu: 64000, MemoryBytes: 64 << 30},
		Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
	}}, registrynet.Policy{Allow: []registrynet.Allowed{allow}})
	if err != nil {
		cancel()
		return err
	}
	env.BeforeStop(func() {
		cancel()
		for range errs {
		}
		<-mgrDone
		os.RemoveAll(state)
	})
	// The downstream's console server, registered with its kube-apiserver as anvil dev
	// does: the broker passes the console calls on to it.
	serving, err := consoleapi.NewServing("127.0.0.1")
	if err != nil {
		return err
	}
	identity, err := env.ServiceAccountConfig(ctx, "kube-system", "anvil-console-server", "cluster-admin")
	if err != nil {
		return err
	}
	consoles, err := consoleapi.New(ctx, identity, mgr.GetAPIReader(), "127.0.0.1:0", serving)
	if err != nil {
		return err
	}
	consolesDone := make(chan error, 1)
	go func() { consolesDone <- consoles.Start(ctx) }()
	env.BeforeStop(func() { cancel(); <-consolesDone })
	if err := consoleapi.RegisterLocal(ctx, env.Client, consoles); err != nil {
		return err
	}
	if images, err = pushImages(); err != nil {
		return err
	}
	// Every test starts on a Ready pool: before, the broker rightly offers nothing.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		p := &computev1alpha1.MachinePool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: downstreamPool}, p); err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MachinePool %s never Ready", downstreamPool)
		}
	}
}

func pushImages() (map[string]*mriv1alpha1.Image, error) {
	dir, err := os.MkdirTemp("", "anvil-broker-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := map[string]*mriv1alpha1.Image{}
	for i, img := range []struct {
		name string
		arch computev1alpha1.Architecture
	}{{"os", computev1alpha1.ArchitectureAMD64}, {"os-2", computev1alpha1.ArchitectureAMD64}, {"arm-only", computev1alpha1.ArchitectureARM64}} {
		disk := filepath.Join(dir, img.name)
		if err := os.WriteFile(disk, []byte(fmt.Sprintf("disk %d", i)), 0o644); err != nil {
			return nil, err
		}
		built, err := osimage.Build(osimage.Files{Architecture: img.arch, DiskFormat: osimage.DiskFormatRaw, Disk: disk})
		if err != nil {
			return nil, err
		}
		idx, err := osimage.Index(built)
		if err != nil {
			return nil, err
		}
		ref := env.Registry.Host + "/anvil/broker-" + img.name + ":test"
		digest, err := osimage.Push(context.Background(), ref, idx)
		if err != nil {
			return nil, err
		}
		out[img.name] = &mriv1alpha1.Image{Reference: ref, Digest: digest}
	}
	return out, nil
}

// spec is a machine spec the downstream runs: class small, amd64, image "os".
func spec() *mriv1alpha1.MachineSpec {
	return &mriv1alpha1.MachineSpec{
		Class:             "small",
		Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
		Image:             &mriv1alpha1.Image{Reference: images["os"].Reference, Digest: images["os"].Digest},
		Architecture:      mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Power:             mriv1alpha1.Power_POWER_ON,
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default"}},
	}
}

// site is a downstream namespace a broker of pool serves.
type site struct {
	t        *testing.T
	ns, pool string
	cacheDir string
}

func newSite(t *testing.T, pool string) *site {
	t.Helper()
	downstream(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "broker-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return &site{t: t, ns: ns.Name, pool: pool, cacheDir: t.TempDir()}
}

// running is a broker and the cache it reads.
type running struct {
	*Runtime
	stop   context.CancelFunc
	done   chan error
	closed sync.Once
}

// Close stops the runtime, then its cache; again, it does nothing.
func (r *running) Close() {
	r.closed.Do(func() {
		r.Runtime.Close()
		r.stop()
		<-r.done
	})
}

// start starts a broker on the site, ready to answer.
func (s *site) start() (*running, error) { return s.startWith(env.Config, env.Client, nil) }

// startWith starts a broker that reaches the downstream through cfg (and cl), its options
// changed by mut.
func (s *site) startWith(cfg *rest.Config, cl client.Client, mut func(*Options)) (*running, error) {
	opts := CacheOptions(s.ns, s.pool)
	opts.Scheme = env.Scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	imgs, err := osimage.NewCache(s.cacheDir, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		return nil, err
	}
	o := Options{Client: cl, Config: cfg, Cache: c, Namespace: s.ns, PoolName: s.pool, Images: imgs,
		Logger: testr.NewWithOptions(s.t, testr.Options{Verbosity: 1})}
	if mut != nil {
		mut(&o)
	}
	rt, err := New(o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Runtime: rt, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Start(ctx) }()
	go func() {
		if err := rt.Run(ctx); err != nil {
			s.t.Errorf("Run: %v", err)
		}
	}()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if err := rt.AwaitReady(rctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// mustStart starts a broker that is closed when the test ends.
func (s *site) mustStart(t *testing.T) *running {
	t.Helper()
	r, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}
