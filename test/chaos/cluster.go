package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/harness/controlplanes"
)

// The namespace of the run's Machines and the names of its pools.
const (
	namespace = "chaos"
	poolFake  = "chaos-fake"
	poolQEMU  = "chaos-qemu"
	poolMetal = "chaos-metal"
	// classSmall fits every pool: the fake one, a VM of the test OS, a fake-hardware Host.
	classSmall = "chaos-small"
)

// cluster is everything the run starts: the control plane and registry in this process's
// care, and anvil's own processes, each killable.
type cluster struct {
	dir      string
	cp       *controlplane.ControlPlane
	c        client.Client
	registry *registry.Registry
	// images are two tags of the test OS (a reimage moves between them), metalImage the
	// fake-hardware Hosts' disk.
	images     [2]string
	metalImage string

	manager *proc
	// emulator is the BMC emulator's process (nil without emulated servers), serving
	// servers, whose folders are in serversDir, on bmcListen.
	emulator   *proc
	servers    []bmcemu.Spec
	serversDir string
	bmcListen  string
	ironicPort int
	// runtimes and poollets by pool.
	runtimes map[string]*proc
	poollets map[string]*proc
	sockets  map[string]string
	journals map[string]string
}

// pools are the pools the run has, in a fixed order (the RNG picks among them).
func (cl *cluster) pools() []string {
	var out []string
	for _, p := range []string{poolFake, poolQEMU, poolMetal} {
		if _, ok := cl.runtimes[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		p, err := harness.LoopbackPort()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// startCluster brings everything up. The caller stops it with stop, also after an error.
func startCluster(ctx context.Context, cfg config, cl *cluster) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	cl.runtimes, cl.poollets = map[string]*proc{}, map[string]*proc{}
	cl.sockets, cl.journals = map[string]string{}, map[string]string{}
	if cl.cp, err = controlplanes.Start(ctx, filepath.Join(cl.dir, "cp"), nil); err != nil {
		return err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	// The churn's users share one client: a single user's default limit (5/s) would
	// throttle them, not anvil.
	rc := cl.cp.RESTConfig()
	rc.QPS, rc.Burst = 200, 400
	if cl.c, err = client.New(rc, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := crd.Install(ctx, cl.c); err != nil {
		return err
	}
	if err := admission.Install(ctx, cl.c); err != nil {
		return err
	}
	if cl.registry, err = registry.Start(ctx, 0, "", nil); err != nil {
		return err
	}
	if err := cl.publish(ctx, cfg); err != nil {
		return err
	}
	if err := cl.seed(ctx, cfg); err != nil {
		return err
	}
	if cfg.metal && cfg.servers+cfg.arm64Servers > 0 {
		if err := cl.startEmulator(ctx, cfg, ports[2]); err != nil {
			return err
		}
	}
	kube := []string{"KUBECONFIG=" + cl.cp.KubeconfigPath()}
	reg := cl.registry.Host
	cl.manager = newProc(cl.dir, "manager", kube, cfg.anvil, "manager", "--allow-registry", reg,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	if err := cl.manager.start(); err != nil {
		return err
	}
	if err := cl.addPool(ctx, cfg, poolFake, "fake", "runtime", "fake", "--cpu", "4000", "--memory", "16Ti",
		"--latency", "100ms", "--jitter", "400ms", "--state-file", filepath.Join(cl.dir, "fake", "state.json")); err != nil {
		return err
	}
	if cfg.vms > 0 {
		if err := cl.addPool(ctx, cfg, poolQEMU, "qemu", "runtime", "qemu", "--state-dir", filepath.Join(cl.dir, "qemu"),
			"--cache-dir", filepath.Join(cl.dir, "qemu-cache"), "--arch", "amd64", "--allow-registry", reg); err != nil {
			return err
		}
	}
	if cfg.metal {
		cl.ironicPort = ports[0]
		args := []string{"runtime", "metal", "--namespace", dev.MetalNamespace,
			"--state-dir", filepath.Join(cl.dir, "metal"), "--ironic-port", strconv.Itoa(cl.ironicPort),
			"--image-listen", "127.0.0.1:" + strconv.Itoa(ports[1]), "--wipe", "none", "--allow-registry", reg}
		if cfg.arm64Servers > 0 {
			// arm64 servers boot UEFI: Ironic builds their boot ISOs around an ESP.
			args = append(args, "--esp-image", filepath.Join(cfg.binDir, "esp.img"))
		}
		if err := cl.addPool(ctx, cfg, poolMetal, "metal", args...); err != nil {
			return err
		}
	}
	for _, p := range cl.pools() {
		if err := cl.runtimes[p].start(); err != nil {
			return err
		}
		if err := cl.poollets[p].start(); err != nil {
			return err
		}
	}
	return cl.waitPoolsReady(ctx, 3*time.Minute)
}

// addPool adds a runtime and its poollet for pool; args are the runtime's after the anvil
// binary, without its socket, name and journal. The poollet runs as its pool's
// ServiceAccount with the shipped roles and admission policy, as anvil dev runs it; so
// does the metal runtime, as its site's.
func (cl *cluster) addPool(ctx context.Context, cfg config, pool, label string, args ...string) error {
	poolletKubeconfig, err := cl.kubeconfigAs(rbac.InstallPoollet(ctx, cl.c, pool))
	if err != nil {
		return err
	}
	var runtimeEnv []string
	if pool == poolMetal {
		site, err := cl.kubeconfigAs(rbac.InstallMetal(ctx, cl.c, dev.MetalNamespace))
		if err != nil {
			return err
		}
		runtimeEnv = []string{"KUBECONFIG=" + site}
	}
	socket := "unix://" + filepath.Join(cl.dir, "run", pool+".sock")
	journal := filepath.Join(cl.dir, pool+"-creates.jsonl")
	rt := append([]string{cfg.anvil}, args...)
	rt = append(rt, "--pool", pool, "--listen", socket, "--create-journal", journal)
	cl.runtimes[pool] = newProc(cl.dir, pool+"-runtime", runtimeEnv, rt...)
	cl.poollets[pool] = newProc(cl.dir, pool+"-poollet", []string{"KUBECONFIG=" + poolletKubeconfig},
		cfg.anvil, "poollet", "--pool", pool, "--runtime", socket, "--interval", "1s",
		"--labels", "chaos="+label, "--allow-registry", cl.registry.Host)
	cl.sockets[pool], cl.journals[pool] = socket, journal
	return nil
}

// kubeconfigAs writes a kubeconfig of the admin impersonating imp.
func (cl *cluster) kubeconfigAs(imp rest.ImpersonationConfig, err error) (string, error) {
	if err != nil {
		return "", err
	}
	cfg := cl.cp.RESTConfig()
	cfg.Impersonate = imp
	path := filepath.Join(cl.dir, "kubeconfig-"+strings.NewReplacer(":", "-", "/", "-").Replace(imp.UserName))
	return path, controlplane.WriteKubeconfig(path, cfg)
}

// publish pushes the test OS under two tags (with arm64 for arm64 servers) and, for the
// metal pool, a disk.
func (cl *cluster) publish(ctx context.Context, cfg config) error {
	sources := map[computev1alpha1.Architecture]string{computev1alpha1.ArchitectureAMD64: filepath.Join(cfg.testOS, "amd64")}
	if cfg.arm64Servers > 0 {
		sources[computev1alpha1.ArchitectureARM64] = filepath.Join(cfg.testOS, "arm64")
	}
	for i, tag := range []string{"a", "b"} {
		if tag == "b" {
			var err error
			if sources, err = otherImage(filepath.Join(cl.dir, "testos-b"), sources); err != nil {
				return err
			}
		}
		ref, _, err := osimage.PushDirs(ctx, cl.registry.Host+"/chaos/testos:"+tag, sources, nil)
		if err != nil {
			return fmt.Errorf("publishing the test OS: %w", err)
		}
		cl.images[i] = ref
	}
	if cfg.metal {
		var err error
		if cl.metalImage, err = dev.PushMetalDisk(ctx, filepath.Join(cl.dir, "metal-disk"), cl.registry.Host); err != nil {
			return err
		}
	}
	return nil
}

// otherImage makes, in dir, the test OS of sources with one more kernel argument, and
// returns its folders: an image of other content, so that a change from one tag to the
// other is a reimage (PushDirs pins each to its digest: the same content is the same
// reference, and a change between them none).
func otherImage(dir string, sources map[computev1alpha1.Architecture]string) (map[computev1alpha1.Architecture]string, error) {
	out := map[computev1alpha1.Architecture]string{}
	for arch, src := range sources {
		dst := filepath.Join(dir, string(arch))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, err
		}
		for _, f := range []string{osimage.KernelFile, osimage.InitramfsFile} {
			if err := os.Symlink(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
				return nil, err
			}
		}
		cmdline, err := os.ReadFile(filepath.Join(src, osimage.CmdlineFile))
		if err != nil {
			return nil, err
		}
		line := strings.TrimSpace(string(cmdline)) + " anvil.chaos.image=b\n"
		if err := os.WriteFile(filepath.Join(dst, osimage.CmdlineFile), []byte(line), 0o644); err != nil {
			return nil, err
		}
		out[arch] = dst
	}
	return out, nil
}

// seed creates the namespaces, the MachineClass and, for the metal pool, its Hosts.
func (cl *cluster) seed(ctx context.Context, cfg config) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: classSmall}, Capabilities: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
	}
	if cfg.metal {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dev.MetalNamespace}})
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(cl.c.Create(ctx, o)); err != nil {
			return err
		}
	}
	if cfg.metal {
		return dev.SeedMetal(ctx, cl.c)
	}
	return nil
}

// waitPoolsReady waits until every pool says Ready.
func (cl *cluster) waitPoolsReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := []string{}
		for _, name := range cl.pools() {
			var p computev1alpha1.MachinePool
			err := cl.c.Get(ctx, client.ObjectKey{Name: name}, &p)
			if err != nil || !meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		for _, p := range cl.all() {
			if p.exited() {
				return fmt.Errorf("%s ended on its own (log %s)", p.name, p.log)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pools %v not Ready after %s (logs in %s)", missing, timeout, cl.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// stop ends anvil's processes, then the registry and control plane, and kills any QEMU
// left under the run's folder (VMs outlive their runtime, servers their BMC, by design).
func (cl *cluster) stop() {
	for _, p := range cl.pools() {
		cl.poollets[p].stop()
		cl.runtimes[p].stop()
	}
	if cl.emulator != nil {
		cl.emulator.stop()
		if err := bmcemu.PowerOffAll(cl.serversDir); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: ending the emulated servers: %v\n", err)
		}
	}
	if cl.manager != nil {
		cl.manager.stop()
	}
	if cl.registry != nil {
		_ = cl.registry.Stop()
	}
	if cl.cp != nil {
		_ = cl.cp.Stop()
	}
	for _, pid := range processesUnder(filepath.Join(cl.dir, "qemu")) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesUnder lists the processes whose command line names a path under dir.
func processesUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir+"/") && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

// all is every process of the run.
func (cl *cluster) all() []*proc {
	out := []*proc{cl.manager}
	for _, p := range cl.pools() {
		out = append(out, cl.runtimes[p], cl.poollets[p])
	}
	if cl.emulator != nil {
		out = append(out, cl.emulator)
	}
	return out
}

// observe reads the Machines, Hosts, every pool's runtime machines and create journals,
// and the emulated servers and Ironic's nodes.
func (cl *cluster) observe(ctx context.Context) (observed, error) {
	o := observed{runtime: map[string][]*mriv1alpha1.Machine{}, journals: map[string][]mri.JournalEntry{}}
	var machines computev1alpha1.MachineList
	if err := cl.c.List(ctx, &machines, client.InNamespace(namespace)); err != nil {
		return o, err
	}
	o.machines = machines.Items
	if _, ok := cl.runtimes[poolMetal]; ok {
		var hosts metalv1alpha1.HostList
		if err := cl.c.List(ctx, &hosts, client.InNamespace(dev.MetalNamespace)); err != nil {
			return o, err
		}
		o.hosts = hosts.Items
		if err := cl.observeIronic(ctx, &o); err != nil {
			return o, err
		}
	}
	for _, pool := range cl.pools() {
		rt, conn, err := mri.Dial(cl.sockets[pool], mri.Pool(pool))
		if err != nil {
			return o, err
		}
		list, err := rt.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{})
		conn.Close()
		if err != nil {
			return o, fmt.Errorf("listing %s's machines: %w", pool, err)
		}
		o.runtime[pool] = list.GetMachines()
		if o.journals[pool], err = mri.ReadJournal(cl.journals[pool]); err != nil {
			return o, err
		}
	}
	if cl.emulator != nil {
		if err := cl.observeServers(ctx, &o); err != nil {
			return o, err
		}
	}
	return o, nil
}
