package capiguest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/metalpool"
	"github.com/anvil-dev/anvil/test/nodeagent"
	"github.com/anvil-dev/anvil/test/testos"
)

const (
	// metalPoolName is the rig's bare-metal pool: emulated amd64 servers under a real,
	// supervised Ironic, labelled as anvil dev labels its pools (compute.anvil.dev/runtime).
	metalPoolName = "capiguest-metal"
	// serverTaint keeps the rig's VM templates, which pick no pool, off the servers: only
	// a template that tolerates it gets one.
	serverTaint = "capiguest.anvil.dev/bare-metal"
	// serverRackLabel is on the pool's Hosts; the servers' template selects them by it.
	serverRackLabel = "capiguest.anvil.dev/rack"
	serverRack      = "r1"
	bmcUser         = "admin"
	bmcPassword     = "emulated-bmc-password"
	// serverTimeout bounds a server's way from a Machine to a healthy Node, or from a
	// deleted Machine to its Host free again: Ironic's deploy, a BIOS boot from a virtual
	// CD, or the eraser's boot and wipe, all TCG on a shared 2-core machine.
	serverTimeout = 6 * time.Minute
)

// servers are the pool's emulated servers: amd64, BIOS, the least the BMC emulator allows.
var servers = []bmcemu.Spec{
	{Name: "server-0", CPUs: 1, MemoryMiB: 1024, DiskGiB: 2, MAC: "52:54:00:c9:00:00"},
	{Name: "server-1", CPUs: 1, MemoryMiB: 1024, DiskGiB: 2, MAC: "52:54:00:c9:00:01"},
}

// metalRig is the rig's bare-metal pool: its Hosts' namespace and the servers' BMC.
type metalRig struct {
	infra string
	bmc   *bmcemu.Emulator
}

var (
	metalOnce sync.Once
	metalPool *metalRig
	metalErr  error
)

// theMetalPool starts, on first use, the rig's metal pool: a BMC emulator in front of
// servers whose one route out is the site network's forward to the workload apiserver, a
// Host for each (BMC credentials in a Secret) that the Cluster's namespace may use, and
// the pool (Ironic, the Host controller, the metal runtime, which wipes released servers
// with the eraser) with its poollet. It waits until every Host is inspected and
// Available, and stops with the package's control plane, as the rig does.
func theMetalPool(t testing.TB, r *rig, c *testCluster) *metalRig {
	t.Helper()
	metalOnce.Do(func() {
		metalErr = errors.New("the metal pool failed to start in an earlier test")
		start := time.Now()
		metalPool, metalErr = startMetalPool(t, r, c.Namespace)
		t.Logf("metal pool with %d Available Hosts in %s", len(servers), time.Since(start).Round(100*time.Millisecond))
	})
	if metalErr != nil {
		t.Fatalf("starting the metal pool: %v", metalErr)
	}
	return metalPool
}

func startMetalPool(t testing.TB, r *rig, tenant string) (*metalRig, error) {
	eraser := testos.EraserDir(t)
	ctx := context.Background()
	var stops []func()
	env.BeforeStop(func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	})
	// Short: the pool's MRI socket and the servers' QMP sockets are inside.
	dir, err := os.MkdirTemp("", "anvil-cgm-")
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = os.RemoveAll(dir) })

	// The site's network routes the servers to the workload apiserver as the QEMU pools'
	// workload network does its VMs, through this test binary's forward mode.
	command, err := qemu.ReachableForwardCommand("")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.workload.RESTConfig().Host, "https://"))
	forwards := qemu.GuestForwards([]qemu.NetworkForward{{Guest: apiserverGuestAddress, Target: net.JoinHostPort("127.0.0.1", port)}}, command)
	bmc, err := bmcemu.Start(bmcemu.Config{StateDir: filepath.Join(dir, "bmc"), Username: bmcUser, Password: bmcPassword,
		Servers: servers, Forwards: forwards, Logger: logr.Discard()})
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() {
		if err := bmc.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the BMC emulator:", err)
		}
		// Servers outlive their BMC: end them.
		if err := bmcemu.PowerOffAll(filepath.Join(dir, "bmc")); err != nil {
			fmt.Fprintln(os.Stderr, "ending the emulated servers:", err)
		}
	})
	m := &metalRig{infra: capienv.Namespace(t, env.Client, "capiguest-infra"), bmc: bmc}

	// The pool exists before its poollet starts, as an admin declares it, so it is tainted
	// before the scheduler ever sees it.
	objs := []client.Object{
		&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: metalPoolName, Labels: map[string]string{dev.LabelRuntime: "metal"}},
			Spec: computev1alpha1.MachinePoolSpec{ProviderID: "metal://" + metalPoolName,
				Taints: []corev1.Taint{{Key: serverTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
		&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: m.infra, Name: "capiguest"},
			Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{tenant}}},
	}
	for _, s := range servers {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.infra, Name: s.Name + "-bmc"},
			Data: map[string][]byte{"username": []byte(bmcUser), "password": []byte(bmcPassword)}}
		objs = append(objs, secret, &metalv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.infra, Name: s.Name, Labels: map[string]string{serverRackLabel: serverRack}},
			Spec: metalv1alpha1.HostSpec{
				BMC:            metalv1alpha1.BMC{Address: bmc.Address(s.Name), CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: secret.Name}},
				BootMACAddress: s.MAC, Architecture: computev1alpha1.ArchitectureAMD64, BootMode: metalv1alpha1.BootMode(s.BootMode()),
			},
		})
	}
	if err := capienv.Create(ctx, env.Client, objs...); err != nil {
		return nil, err
	}
	p, err := metalpool.Start(ctx, env.Config, env.Client, pool.Config{
		Site: site.Config{RestConfig: env.Config, Namespace: m.infra, StateDir: filepath.Join(dir, "site"), BusyPoll: 500 * time.Millisecond,
			Wipe: site.Wipe{Method: site.WipeEraser, EraserDir: eraser}, Logger: logr.Discard()},
		Name: metalPoolName, ImageCacheDir: filepath.Join(dir, "cache"),
		ImageCache: osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}},
	}, 2*time.Second)
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the metal pool:", err)
		}
	})
	err = capienv.Poll(serverTimeout, func() error {
		for _, s := range servers {
			h, err := m.host(s.Name)
			if err != nil {
				return err
			}
			if !free(h) {
				return fmt.Errorf("Host %s: %s", h.Name, describeHost(h))
			}
		}
		return nil
	})
	return m, err
}

// serverSpec is an AnvilMachine of the node image on a server of the metal pool: picked
// by the pool's runtime label and its taint tolerated, on a Host of the rack. No NIC: a
// server's NIC is its own, and the site routes it to the apiserver.
func (r *rig) serverSpec() infrav1.AnvilMachineSpec {
	return infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: guestClass},
		Image: r.image, Architecture: computev1alpha1.ArchitectureAMD64,
		MachinePoolSelector: map[string]string{dev.LabelRuntime: "metal"},
		HostSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{serverRackLabel: serverRack}},
		Tolerations:         []corev1.Toleration{{Key: serverTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
}

func (m *metalRig) host(name string) (*metalv1alpha1.Host, error) {
	h := &metalv1alpha1.Host{}
	return h, env.Client.Get(context.Background(), client.ObjectKey{Namespace: m.infra, Name: name}, h)
}

// free is a Host no Machine holds, inspected (or wiped) and ready for the next.
func free(h *metalv1alpha1.Host) bool {
	return h.Status.ProvisioningState == metalv1alpha1.StateAvailable && h.Status.OperationalStatus == metalv1alpha1.OperationalOK &&
		h.Spec.ConsumerRef == nil && h.Status.Image == nil
}

func describeHost(h *metalv1alpha1.Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s op=%s power=%s consumer=%v err=%q", h.Status.ProvisioningState, h.Status.OperationalStatus,
		h.Status.PowerState, h.Spec.ConsumerRef, h.Status.LastError)
	for _, c := range h.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// serverOf is the Host holding the anvil Machine (by its consumerRef, uid included).
func (m *metalRig) serverOf(t testing.TB, anvil *computev1alpha1.Machine) *metalv1alpha1.Host {
	t.Helper()
	var hosts metalv1alpha1.HostList
	if err := env.Client.List(context.Background(), &hosts, client.InNamespace(m.infra)); err != nil {
		t.Fatal(err)
	}
	var held []*metalv1alpha1.Host
	for i, h := range hosts.Items {
		if c := h.Spec.ConsumerRef; c != nil && c.Namespace == anvil.Namespace && c.Name == anvil.Name && c.UID == string(anvil.UID) {
			held = append(held, &hosts.Items[i])
		}
	}
	if len(held) != 1 {
		t.Fatalf("anvil Machine %s/%s is held by %d Hosts, want 1", anvil.Namespace, anvil.Name, len(held))
	}
	return held[0]
}

// guestServer is what the test reads of the server under a Cluster API Machine.
type guestServer struct {
	anvil *computev1alpha1.Machine
	host  string
	node  *corev1.Node
}

// assertServerNode checks that the Node of a healthy Machine was registered by its own
// server: the anvil Machine runs on the metal pool, held by one provisioned Host; the Node
// is named after the machine's hostname, carries the Machine's providerID (from the config
// drive's metadata), amd64 as label and in nodeInfo, and the server's address; the agent's
// registration is on that server's console; and its credentials came from the workload
// cluster's TLS bootstrap.
func (m *metalRig) assertServerNode(t testing.TB, r *rig, cm *clusterv1.Machine) guestServer {
	t.Helper()
	ctx := context.Background()
	g := guestServer{anvil: &computev1alpha1.Machine{}, node: &corev1.Node{}}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: cm.Spec.InfrastructureRef.Name}, g.anvil); err != nil {
		t.Fatalf("the anvil Machine of %s: %v", cm.Name, err)
	}
	a := g.anvil
	if a.Status.State != computev1alpha1.MachineStateRunning || a.Status.Pool != metalPoolName || a.Status.Architecture != computev1alpha1.ArchitectureAMD64 {
		t.Fatalf("anvil Machine %s: %s %s on %q; want Running amd64 on %s", a.Name, a.Status.State, a.Status.Architecture, a.Status.Pool, metalPoolName)
	}
	h := m.serverOf(t, a)
	g.host = h.Name
	if h.Status.ProvisioningState != metalv1alpha1.StateProvisioned || h.Labels[serverRackLabel] != serverRack {
		t.Errorf("Host %s of anvil Machine %s: %s, labels %v; want provisioned, of rack %s", h.Name, a.Name, describeHost(h), h.Labels, serverRack)
	}
	hostname := a.Spec.Hostname
	if hostname == "" {
		hostname = a.Name
	}
	if cm.Status.NodeRef.Name != hostname {
		t.Errorf("Machine %s has nodeRef %q, want its server's hostname %q", cm.Name, cm.Status.NodeRef.Name, hostname)
	}
	if err := r.workloadClient.Get(ctx, client.ObjectKey{Name: cm.Status.NodeRef.Name}, g.node); err != nil {
		t.Fatalf("Node %s of Machine %s: %v", cm.Status.NodeRef.Name, cm.Name, err)
	}
	n := g.node
	if n.Spec.ProviderID != cm.Spec.ProviderID || n.Spec.ProviderID != "anvil://"+a.Namespace+"/"+a.Name {
		t.Errorf("Node %s has providerID %q; Machine %s has %q, its anvil Machine is %s/%s", n.Name, n.Spec.ProviderID, cm.Name, cm.Spec.ProviderID, a.Namespace, a.Name)
	}
	if n.Labels[corev1.LabelArchStable] != "amd64" || n.Status.NodeInfo.Architecture != "amd64" {
		t.Errorf("Node %s: label %s=%q, nodeInfo.architecture %q; its server is amd64", n.Name, corev1.LabelArchStable,
			n.Labels[corev1.LabelArchStable], n.Status.NodeInfo.Architecture)
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == vm.GuestAddress }) {
		t.Errorf("Node %s has addresses %v, not the server's %s", n.Name, n.Status.Addresses, vm.GuestAddress)
	}
	raw, err := os.ReadFile(m.bmc.ConsolePath(h.Name))
	if err != nil {
		t.Fatal(err)
	}
	if line := nodeagent.RegisteredLine(n.Name, n.Spec.ProviderID); !strings.Contains(string(raw), line) {
		t.Errorf("the console of server %s has no %q:\n%s", h.Name, line, string(raw))
	}
	assertBootstrapped(t, r, n.Name)
	return g
}

// awaitServerFreed waits until a deleted Machine's anvil Machine and Node are gone and its
// Host is free again: deprovisioned, wiped by the eraser, powered off with no media.
func (m *metalRig) awaitServerFreed(t testing.TB, r *rig, g guestServer) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	capienv.Eventually(t, serverTimeout, fmt.Sprintf("anvil Machine %s and Node %s gone, Host %s free", g.anvil.Name, g.node.Name, g.host), func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g.anvil), &computev1alpha1.Machine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("anvil Machine %s: %v", g.anvil.Name, err)
		}
		if err := r.workloadClient.Get(ctx, client.ObjectKeyFromObject(g.node), &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Node %s: %v", g.node.Name, err)
		}
		h, err := m.host(g.host)
		if err != nil {
			return err
		}
		if !free(h) {
			return fmt.Errorf("Host %s: %s", h.Name, describeHost(h))
		}
		return nil
	})
	if cond := findCondition(m, t, g.host, metalv1alpha1.ConditionWiped); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("freed Host %s was not wiped: %+v", g.host, cond)
	}
	if inserted := m.bmc.InsertedMedia(g.host); len(inserted) != 0 {
		t.Errorf("freed server %s still holds media %v", g.host, inserted)
	}
	t.Logf("Host %s free again %s after its Machine went", g.host, time.Since(start).Round(100*time.Millisecond))
}

func findCondition(m *metalRig, t testing.TB, host, typ string) *metav1.Condition {
	t.Helper()
	h, err := m.host(host)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == typ {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// One Cluster on three kinds of machines at once, driven by the real Cluster API manager:
// a MachineDeployment of amd64 VMs, one of arm64 VMs and one of emulated amd64 servers of
// the metal pool (deployed by Ironic through their BMC, node image booted from virtual
// media, the Machine's bootstrap script and metadata from the config drive). Every Machine
// reaches Running with a nodeRef and NodeHealthy from the Node its own guest or server
// registered, with its architecture. Each MachineDeployment is scaled up and down: the
// servers' 1 → 2 → 1 → 2 frees a Host on the way down (the anvil Machine and Node go, the
// server is deprovisioned and wiped) and reuses that very Host on the way up; no Host is
// ever held by two Machines.
func TestHybridClusterWithServers(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	m := theMetalPool(t, r, c)
	ctx := context.Background()
	start := time.Now()
	phase := func(what string, since time.Time) {
		t.Logf("phase %s: %s", what, time.Since(since).Round(100*time.Millisecond))
	}

	amd, amdTmpl := capienv.MachineDeployment(c.Cluster, "hybrid-amd64", bootstrapSecret, "", r.machineSpec(computev1alpha1.ArchitectureAMD64), 1)
	arm, armTmpl := capienv.MachineDeployment(c.Cluster, "hybrid-arm64", bootstrapSecret, "", r.machineSpec(computev1alpha1.ArchitectureARM64), 1)
	srv, srvTmpl := capienv.MachineDeployment(c.Cluster, "hybrid-servers", bootstrapSecret, "", r.serverSpec(), 1)
	if err := capienv.Create(ctx, env.Client, amdTmpl, amd, armTmpl, arm, srvTmpl, srv); err != nil {
		t.Fatal(err)
	}
	waitServers := func(n int) map[string]guestServer {
		t.Helper()
		out, held := map[string]guestServer{}, map[string]string{}
		for _, cm := range waitHealthy(t, srv, n) {
			g := m.assertServerNode(t, r, &cm)
			if other, ok := held[g.host]; ok {
				t.Fatalf("Host %s is claimed by two Machines, %s and %s", g.host, other, cm.Name)
			}
			out[cm.Name], held[g.host] = g, cm.Name
		}
		return out
	}
	t0 := time.Now()
	for _, d := range []struct {
		md   *clusterv1.MachineDeployment
		arch computev1alpha1.Architecture
	}{{amd, computev1alpha1.ArchitectureAMD64}, {arm, computev1alpha1.ArchitectureARM64}} {
		for _, cm := range waitHealthy(t, d.md, 1) {
			assertGuestNode(t, r, &cm, d.arch)
		}
	}
	waitServers(1)
	phase("three MachineDeployments of 1 healthy", t0)

	// Up: a second server (the other Host) and a second arm64 VM join.
	t0 = time.Now()
	if err := capienv.Scale(ctx, env.Client, srv, 2); err != nil {
		t.Fatal(err)
	}
	if err := capienv.Scale(ctx, env.Client, arm, 2); err != nil {
		t.Fatal(err)
	}
	two := waitServers(2) // on two Hosts: each of the pool's
	for _, cm := range waitHealthy(t, arm, 2) {
		assertGuestNode(t, r, &cm, computev1alpha1.ArchitectureARM64)
	}
	phase("servers and arm64 VMs scaled to 2", t0)

	// Down: one server's Machine goes and its Host is freed; one arm64 VM goes; an amd64
	// VM joins.
	t0 = time.Now()
	for _, s := range []struct {
		md *clusterv1.MachineDeployment
		n  int32
	}{{srv, 1}, {arm, 1}, {amd, 2}} {
		if err := capienv.Scale(ctx, env.Client, s.md, s.n); err != nil {
			t.Fatal(err)
		}
	}
	kept := waitHealthy(t, srv, 1)
	gone, ok := two[kept[0].Name], false
	for name, g := range two {
		if name != kept[0].Name {
			gone, ok = g, true
		}
	}
	if !ok {
		t.Fatalf("after the scale-down, Machine %s is kept: not one of the two before", kept[0].Name)
	}
	m.awaitServerFreed(t, r, gone)
	for _, cm := range waitHealthy(t, amd, 2) {
		assertGuestNode(t, r, &cm, computev1alpha1.ArchitectureAMD64)
	}
	waitHealthy(t, arm, 1)
	phase("servers and arm64 VMs scaled to 1, amd64 VMs to 2", t0)

	// Up again: the new server Machine gets the Host just freed (the only free one), and
	// the amd64 VMs go back to 1.
	t0 = time.Now()
	if err := capienv.Scale(ctx, env.Client, srv, 2); err != nil {
		t.Fatal(err)
	}
	if err := capienv.Scale(ctx, env.Client, amd, 1); err != nil {
		t.Fatal(err)
	}
	again := waitServers(2)
	var reused *guestServer
	for name, g := range again {
		if name != kept[0].Name {
			reused = &g
		}
	}
	if reused == nil || reused.host != gone.host {
		t.Fatalf("the new server Machine is on %+v, want the freed Host %s", reused, gone.host)
	}
	if reused.node.Name == gone.node.Name || reused.anvil.UID == gone.anvil.UID {
		t.Errorf("the reused Host's Node %s (anvil Machine %s) is the old one's", reused.node.Name, reused.anvil.UID)
	}
	waitHealthy(t, amd, 1)
	phase(fmt.Sprintf("servers scaled to 2 again, Host %s reused; amd64 VMs back to 1", gone.host), t0)
	t.Logf("the whole test took %s", time.Since(start).Round(100*time.Millisecond))
}
