package dev

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// LabelRuntime on the pools anvil dev starts names their runtime, so a Machine can ask for
// real VMs (qemu) or the fake runtime with a machinePoolSelector.
const LabelRuntime = "compute.anvil.dev/runtime"

// FakePool is a pool of the fake runtime that anvil dev runs in-process, so a new user
// sees Machines reach Running without any hypervisor.
type FakePool struct {
	Name   string
	Config fake.Config
}

// runtimeServer is a runtime anvil dev runs in-process.
type runtimeServer interface {
	mriv1alpha1.MachineRuntimeServer
	Close()
}

// StartFakePool runs the fake runtime in-process behind its socket in stateDir, and its
// poollet acting as the pool's own ServiceAccount (see poolletIdentity); both stop when ctx
// ends. anvil dev and the scale scenarios use it.
func StartFakePool(ctx context.Context, cfg *rest.Config, stateDir string, p FakePool, network registrynet.Policy) (<-chan error, error) {
	p.Config.Name = p.Name
	p.Config.StateFile = filepath.Join(stateDir, "pools", p.Name, "fake-runtime.json")
	rt, err := fake.New(p.Config)
	if err != nil {
		return nil, err
	}
	return runPool(ctx, cfg, stateDir, p.Name, rt, "fake", network)
}

// QemuPoolName is the pool anvil dev runs for one architecture's VMs.
func QemuPoolName(arch computev1alpha1.Architecture) string { return "dev-qemu-" + string(arch) }

// QemuMachineDir is the folder on this host where anvil dev's pool for arch, run in
// stateDir, keeps machine id's files (its console log, qemu.log, disks):
// docs/qemu-runtime.md's layout under the pool's runtime state directory.
func QemuMachineDir(stateDir string, arch computev1alpha1.Architecture, id string) string {
	return qemu.MachineDir(qemuStateDir(stateDir, QemuPoolName(arch)), id)
}

func qemuStateDir(stateDir, pool string) string { return filepath.Join(stateDir, "pools", pool, "vms") }

// qemuArchitectures are the architectures (of want; every one when empty) whose QEMU program
// is installed, and a note naming those that are not.
func qemuArchitectures(want []computev1alpha1.Architecture) (found []computev1alpha1.Architecture, missing string) {
	if len(want) == 0 {
		want = []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}
	}
	for _, arch := range want {
		program, err := vm.Binary(arch)
		if err != nil {
			continue
		}
		if _, err := exec.LookPath(program); err != nil {
			missing += fmt.Sprintf(" (%s not installed: make deps installs it)", program)
			continue
		}
		found = append(found, arch)
	}
	return found, missing
}

// NodeNetwork is the segment of anvil dev's QEMU pools (both architectures): a Machine's
// NIC there reaches the Machines of its namespace there, and nothing else; the switch
// gives it an address of NodeSubnet (docs/qemu-runtime.md, "Segments").
const NodeNetwork = "anvil-nodes"

// NodeSubnet is NodeNetwork's addresses in every namespace's segment: 10.200.0.1 is the
// gateway. It is apart from QEMU's user network (10.0.2.0/24) and Kubernetes' usual pod
// (10.244.0.0/16) and service (10.96.0.0/12) ranges.
var NodeSubnet = netip.MustParsePrefix("10.200.0.0/24")

// networkAccess is who may join each network anvil dev's QEMU pools serve: builders on
// theirs, every namespace on KubeNetwork (it reaches public images only).
var networkAccess = map[string]computev1alpha1.NetworkAccess{
	BuilderNetwork: {Name: BuilderNetwork, Builders: true},
	KubeNetwork:    {Name: KubeNetwork, Tenants: &computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{}}},
}

// StartQemuPool runs a qemu runtime for one architecture and its poollet (anvil dev and the
// boot benchmark use it). Its VMs keep
// running when anvil dev stops; the next start adopts them.
// sw, when set, is the switch of the networks that are segments, shared with the host's
// other QEMU pools so their VMs share segments.
func StartQemuPool(ctx context.Context, cfg *rest.Config, stateDir string, arch computev1alpha1.Architecture, images osimage.CacheOptions, networks map[string]qemu.Network, forward []string, sw *netswitch.Switch, log logr.Logger) (<-chan error, error) {
	name := QemuPoolName(arch)
	for network := range networks {
		access, ok := networkAccess[network]
		if !ok {
			continue
		}
		if err := DeclareNetwork(ctx, cfg, name, access); err != nil {
			return nil, fmt.Errorf("declaring pool %s's network %s: %w", name, network, err)
		}
	}
	cache, err := osimage.NewCache(filepath.Join(stateDir, "pools", name, "cache"), images)
	if err != nil {
		return nil, err
	}
	rt, err := qemu.New(qemu.Config{
		Name: name, StateDir: qemuStateDir(stateDir, name),
		Architectures: []computev1alpha1.Architecture{arch},
		Images:        cache, Index: &imageref.Registry{Transport: images.Network.Transport()}, Seeds: nocloud.WriteISO, Networks: networks, ForwardCommand: forward, Switch: sw,
		Logger: log.WithName("runtime").WithValues("pool", name),
	})
	if err != nil {
		return nil, err
	}
	cache.SetInUse(rt.ImageFilesInUse)
	return runPool(ctx, cfg, stateDir, name, rt, "qemu", images.Network)
}

// runPool serves rt on a socket in the state directory and runs a poollet for it, which
// reads image tags through network (the runtime's image cache's). Both stop when ctx ends;
// errors arrive on the returned channel, which is closed once both have stopped.
func runPool(ctx context.Context, cfg *rest.Config, stateDir, name string, rt runtimeServer, kind string, network registrynet.Policy) (<-chan error, error) {
	endpoint := "unix://" + filepath.Join(stateDir, "run", name+".sock")
	l, err := mri.Listen(endpoint)
	if err != nil {
		rt.Close()
		return nil, err
	}
	client, conn, err := mri.Dial(endpoint, mri.Pool(name))
	if err != nil {
		l.Close()
		rt.Close()
		return nil, err
	}
	o := poollet.DefaultOptions(name)
	o.Runtime, o.ProviderID = client, kind+"://"+name
	o.Images = poollet.NewRegistryImages(network)
	// The registries it logs in to (anvil dev's own) hold Machines to their namespace's images.
	o.ImageFolders = imageowner.FoldersFor(network.Logins, nil)
	o.Labels = map[string]string{LabelRuntime: kind}
	o.SkipControllerNameValidation = true
	o.ConsoleAddress = "127.0.0.1:0"
	identity, err := poolletIdentity(ctx, cfg, name)
	if err != nil {
		l.Close()
		conn.Close()
		rt.Close()
		return nil, err
	}
	mgr, err := poollet.New(identity, o)
	if err != nil {
		l.Close()
		conn.Close()
		rt.Close()
		return nil, err
	}
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer rt.Close()
		if err := mri.ServeListener(ctx, l, rt, mri.Pool(name)); err != nil {
			errs <- fmt.Errorf("%s runtime %s: %w", kind, name, err)
		}
	}()
	go func() {
		defer wg.Done()
		defer conn.Close()
		if err := mgr.Start(ctx); err != nil {
			errs <- fmt.Errorf("poollet %s: %w", name, err)
		}
	}()
	go func() { wg.Wait(); close(errs) }() // a caller that must outlive them waits for this
	return errs, nil
}

// poolletIdentity is cfg acting as the pool's own poollet ServiceAccount, with the shipped
// poollet roles: as on a real pool host, the poollet can then write only what its pool's
// scope allows (admission policy anvil-poollet-scope), though it runs in the admin's
// process.
func poolletIdentity(ctx context.Context, cfg *rest.Config, pool string) (*rest.Config, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	imp, err := rbac.InstallPoollet(ctx, c, pool)
	if err != nil {
		return nil, fmt.Errorf("the identity of poollet %s: %w", pool, err)
	}
	return impersonating(cfg, imp), nil
}

// impersonating is cfg acting as imp.
func impersonating(cfg *rest.Config, imp rest.ImpersonationConfig) *rest.Config {
	identity := rest.CopyConfig(cfg)
	identity.Impersonate = imp
	return identity
}

// poolSet is the pools anvil dev started: their names for the summary, and the errors of
// all of them on one channel.
type poolSet struct {
	names []string
	errs  chan error
}

// add records a started pool and forwards its errors.
func (s *poolSet) add(name string, errs <-chan error) {
	s.names = append(s.names, name)
	go func() {
		for err := range errs {
			s.errs <- err
		}
	}()
}

// startPools starts the pools o asks for: fake ones, one QEMU pool per architecture this
// machine can run (and, on mgr, the LoadBalancers of their segment), and the metal pool.
func startPools(ctx context.Context, o Options, mgr ctrl.Manager, cfg *rest.Config, c client.Client, stateDir, registryHost string, images osimage.CacheOptions) (*poolSet, error) {
	pools := &poolSet{errs: make(chan error, 1)}
	for _, p := range o.FakePools {
		errs, err := StartFakePool(ctx, cfg, stateDir, p, images.Network)
		if err != nil {
			return nil, fmt.Errorf("starting pool %s: %w", p.Name, err)
		}
		pools.add(p.Name+" (fake runtime)", errs)
	}
	if o.QemuPools {
		archs, missing := qemuArchitectures(o.QemuArchitectures)
		dir, err := qemu.SwitchDir(stateDir)
		if err != nil {
			return nil, err
		}
		qemuUser, err := vm.UserForRoot("") // the pools' QEMU user, which sends the frames
		if err != nil {
			return nil, err
		}
		sw, err := netswitch.New(dir, ctrl.Log.WithName("switch"), qemuUser.UIDs()...)
		if err != nil {
			return nil, err
		}
		go func() { <-ctx.Done(); _ = sw.Close() }()
		if err := serveLoadBalancers(ctx, mgr, sw); err != nil {
			return nil, err
		}
		for _, arch := range archs {
			networks := BuilderNetworks(registryHost, o.PackageProxy)
			networks[NodeNetwork] = qemu.Network{Segment: &qemu.Segment{Subnet: NodeSubnet}}
			if o.KubeImagesDir != "" {
				addKubeNetwork(networks, registryHost)
			}
			errs, err := StartQemuPool(ctx, cfg, stateDir, arch, images, networks, nil, sw, ctrl.Log)
			if err != nil {
				return nil, fmt.Errorf("starting pool %s: %w", QemuPoolName(arch), err)
			}
			pools.add(QemuPoolName(arch)+" (QEMU; VMs keep running after Ctrl-C)", errs)
		}
		if missing != "" {
			pools.names = append(pools.names, "no QEMU pool for"+missing)
		}
	}
	if o.MetalPool {
		if err := startDevMetal(ctx, cfg, c, stateDir, registryHost, images, o, pools); err != nil {
			return nil, err
		}
	}
	return pools, nil
}

// PoolImages is how anvil dev's pools pull: anonymously from public registries, and from
// anvil dev's own registry on loopback (by its address, or as localhost), the one
// non-public registry they may reach, with logins (the pools' read credential).
func PoolImages(registryHost string, logins map[string]registrynet.Login) osimage.CacheOptions {
	var allow []registrynet.Allowed
	for _, e := range devRegistry(registryHost) {
		// registryHost is the registry's own listening address, never outside input: an
		// entry that does not parse is left out (and its pulls refused, saying why).
		if a, err := registrynet.ParseAllowed(e); err == nil {
			allow = append(allow, a)
		}
	}
	return osimage.CacheOptions{Network: registrynet.Policy{Allow: allow, Logins: logins}}
}

// devRegistry is the allow-list entries of anvil dev's registry: the pools' and the
// manager's (--allow-registry), which reads its images' indexes.
func devRegistry(registryHost string) []string {
	_, port, _ := net.SplitHostPort(registryHost)
	return []string{registryHost, net.JoinHostPort("localhost", port)}
}

// announcePools creates, before the samples are applied, the MachinePool of each pool
// startPools is about to start, as each poollet would on its start: a sample Machine
// created before its pool has reported then waits for it (WaitingForPools, no Warning)
// rather than being told that no pool fits. The bare-metal pool starts last, after
// Ironic, and offers nothing until its first servers are inspected.
func announcePools(ctx context.Context, c client.Client, o Options) error {
	type pool struct{ name, kind string }
	var want []pool
	for _, p := range o.FakePools {
		want = append(want, pool{p.Name, "fake"})
	}
	if o.QemuPools {
		archs, _ := qemuArchitectures(o.QemuArchitectures)
		for _, arch := range archs {
			want = append(want, pool{QemuPoolName(arch), "qemu"})
		}
	}
	if o.MetalPool {
		want = append(want, pool{MetalPoolName, "metal"})
	}
	for _, p := range want {
		mp := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{LabelRuntime: p.kind}},
			Spec: computev1alpha1.MachinePoolSpec{ProviderID: p.kind + "://" + p.name}}
		if err := c.Create(ctx, mp); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating MachinePool %s: %w", p.name, err)
		}
	}
	return nil
}
