package metal

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env, shared.Stop) }

// pushedImage is an OS image in the harness registry.
type pushedImage struct {
	Reference, Digest string
	// Disk is the checksum of the amd64 disk, when the image has one.
	Disk string
}

var (
	imagesOnce sync.Once
	images     map[string]pushedImage
	imagesErr  error
)

// testImages pushes, once per test binary: "os" and "os-2" (two amd64 disks of 1 MiB),
// "kernel-only" (amd64, no disk) and "arm-only" (an arm64 disk).
func testImages(t *testing.T) map[string]pushedImage {
	t.Helper()
	imagesOnce.Do(func() { images, imagesErr = pushImages() })
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return images
}

func pushImages() (map[string]pushedImage, error) {
	dir, err := os.MkdirTemp("", "anvil-metal-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	write := func(name string, seed byte) (string, error) {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i*7) ^ seed
		}
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, b, 0o644)
	}
	out := map[string]pushedImage{}
	for _, img := range []struct {
		name  string
		files osimage.Files
	}{
		{"os", osimage.Files{Architecture: computev1alpha1.ArchitectureAMD64, DiskFormat: osimage.DiskFormatRaw}},
		{"kernel-only", osimage.Files{Architecture: computev1alpha1.ArchitectureAMD64}},
		{"arm-only", osimage.Files{Architecture: computev1alpha1.ArchitectureARM64, DiskFormat: osimage.DiskFormatRaw}},
		{"os-2", osimage.Files{Architecture: computev1alpha1.ArchitectureAMD64, DiskFormat: osimage.DiskFormatRaw}},
	} {
		f := img.files
		var err error
		if f.DiskFormat != "" {
			f.Disk, err = write(img.name+".disk", byte(len(out)+1))
		} else {
			f.Kernel, err = write(img.name+".kernel", 0xee)
		}
		if err != nil {
			return nil, err
		}
		built, err := osimage.Build(f)
		if err != nil {
			return nil, err
		}
		idx, err := osimage.Index(built)
		if err != nil {
			return nil, err
		}
		ref := env.Registry.Host + "/anvil/metal-" + img.name + ":test"
		digest, err := osimage.Push(context.Background(), ref, idx)
		if err != nil {
			return nil, err
		}
		p := pushedImage{Reference: ref, Digest: digest}
		if f.Disk != "" {
			m, err := built.Manifest()
			if err != nil {
				return nil, err
			}
			p.Disk = m.Layers[0].Digest.String()
		}
		out[img.name] = p
	}
	return out, nil
}

// site is an infrastructure namespace with Hosts, a HostPolicy for one tenant namespace,
// and whatever drives its Hosts.
type site struct {
	t             *testing.T
	infra, tenant string
	hosts         []string
	images        map[string]pushedImage
	cacheDir      string
	listen        string
	sweepGrace    time.Duration
	// deployments are those the Host controller made.
	deployments *deployments
}

// newSite makes a site of n fake-hardware Hosts of 8 cpus and 16 GiB, every one open to
// the tenant namespace.
func newSite(t *testing.T, n int) *site {
	t.Helper()
	s := &site{t: t, infra: newNamespace(t, "infra", nil), images: testImages(t), cacheDir: t.TempDir(), listen: freeAddress(t)}
	s.tenant = newNamespace(t, "tenant", map[string]string{"metal": "yes"})
	create(t, &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: "tenants"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{s.tenant}}})
	for i := range n {
		name := fmt.Sprintf("host-%02d", i)
		create(t, &metalv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: name, Labels: map[string]string{"rack": fmt.Sprint(i % 2)}},
			Spec: metalv1alpha1.HostSpec{
				// Ironic's fake hardware takes the server's size from the address.
				BMC:            metalv1alpha1.BMC{Address: "fake://" + name + "?cpus=8&memory_mb=16384&local_gb=100"},
				BootMACAddress: fmt.Sprintf("52:54:00:00:%02x:%02x", (i>>8)&0xff, i&0xff),
				Architecture:   computev1alpha1.ArchitectureAMD64,
			},
		})
		s.hosts = append(s.hosts, name)
	}
	s.deployments = startInfrastructure(t, s.infra)
	awaitAvailable(t, s.infra, s.hosts)
	return s
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	create(t, ns)
	return ns.Name
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// running is a runtime with its own cache, as one process of `anvil runtime metal`.
type running struct {
	*Runtime
	stop context.CancelFunc
	done chan error
}

// Close stops the runtime, then its cache.
func (r *running) Close() {
	r.Runtime.Close()
	r.stop()
	<-r.done
}

// start starts a runtime on the site, ready to answer.
func (s *site) start() (*running, error) { return s.startOn(s.listen) }

// startOn starts a runtime whose image server listens on listen.
func (s *site) startOn(listen string) (*running, error) {
	opts := CacheOptions(s.infra)
	opts.Scheme = env.Scheme
	c, err := cache.New(env.Config, opts)
	if err != nil {
		return nil, err
	}
	images, err := osimage.NewCache(s.cacheDir, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		return nil, err
	}
	rt, err := New(Options{Client: env.Client, Cache: c, Namespace: s.infra, PoolName: "metal", Images: images,
		ImageListen: listen, Logger: testr.NewWithOptions(s.t, testr.Options{Verbosity: 1}), sweepGrace: s.sweepGrace})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Runtime: rt, stop: cancel, done: make(chan error, 2)}
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

// mustStart starts a runtime that is closed when the test ends.
func (s *site) mustStart(t *testing.T) *running {
	t.Helper()
	r, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// spec is a small powered-on amd64 machine of the image, with cloud-init user data.
func (s *site) spec(image string) *mriv1alpha1.MachineSpec {
	img := s.images[image]
	return &mriv1alpha1.MachineSpec{
		Class:             "small",
		Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
		Image:             &mriv1alpha1.Image{Reference: img.Reference, Digest: img.Digest},
		Architecture:      mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Power:             mriv1alpha1.Power_POWER_ON,
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default"}},
		FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT,
			Data: []byte("#cloud-config\nhostname: metal\n")},
	}
}

// machine is a machine of the tenant with the poollet's labels.
func (s *site) machine(name string, spec *mriv1alpha1.MachineSpec) *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{
			mri.LabelMachineUID:   s.tenant + "/" + name + "/" + fmt.Sprint(time.Now().UnixNano()),
			LabelMachineNamespace: s.tenant, LabelMachineName: name,
		}},
		Spec: spec,
	}
}

func (s *site) host(name string) *metalv1alpha1.Host {
	s.t.Helper()
	h := &metalv1alpha1.Host{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.infra, Name: name}, h); err != nil {
		s.t.Fatal(err)
	}
	return h
}

// await polls a runtime until cond holds for machine id (nil once gone).
func await(t *testing.T, rt *Runtime, id, what string, cond func(*mriv1alpha1.Machine) bool) *mriv1alpha1.Machine {
	t.Helper()
	var m *mriv1alpha1.Machine
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := rt.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{Id: id})
		if err != nil {
			return false, err
		}
		m = nil
		if len(resp.Machines) == 1 {
			m = resp.Machines[0]
		}
		return cond(m), nil
	})
	if err != nil {
		t.Fatalf("machine %s never %s: %v; last seen %v", id, what, err, m)
	}
	return m
}

func settledIn(state mriv1alpha1.MachineState) func(*mriv1alpha1.Machine) bool {
	return func(m *mriv1alpha1.Machine) bool {
		return m != nil && m.Status.ObservedGeneration == m.Metadata.Generation && m.Status.State == state
	}
}
