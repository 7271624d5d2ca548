package capiguest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/pki"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/harness/controlplanes"
	"github.com/anvil-dev/anvil/test/nodeagent/nodeagenttest"
	"github.com/anvil-dev/anvil/test/nodeagent/nodeimage"
	"github.com/anvil-dev/anvil/test/testos"
)

var env *harness.Env

func TestMain(m *testing.M) {
	// The qemu runtime runs this test binary for each connection a guest makes to its
	// network's forward (as `anvil forward` in a fleet).
	if len(os.Args) >= 3 && os.Args[1] == "forward" {
		if qemu.ServeForwardArgs(os.Args[2:], os.Stdin, os.Stdout) != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	harness.Main(m, &env)
}

const (
	// workloadNetwork is the NIC network of the clusters' VMs: its one way out is a forward
	// to the workload apiserver, at apiserverGuestAddress.
	workloadNetwork       = "workload"
	apiserverGuestAddress = "10.0.2.100:6443"
	// guestClass is small: TCG guests of the test OS with the agent need little memory.
	guestClass = "guest"
	// gracePeriod is the workload kube-controller-manager's node monitor grace period:
	// twice the agents' Lease interval (10 s), so a running guest never flaps NotReady on a
	// busy machine, and a stopped one is NotReady within it.
	gracePeriod = 20 * time.Second
	// capiSyncPeriod is how often Cluster API's manager reconciles every object anyway.
	// Without a control-plane provider, Cluster API watches a cluster's Nodes only once its
	// control plane is initialized, which takes the first control-plane Machine's nodeRef: a
	// guest's Node that appears after that Machine's last reconcile is found only at the
	// next resync (10 min by default).
	capiSyncPeriod = 15 * time.Second
	// bootTimeout bounds a Machine's way from creation to a healthy Node: TCG guests, up to
	// four at once, on a shared 2-core machine. It is a bound, not a speed figure: alone two
	// guests are healthy in 20 s, but make test starts this package beside the light lane's
	// compiles and control planes, and there 4 minutes were once not enough (CI, session 15).
	bootTimeout = 8 * time.Minute
)

var archs = []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}

// rig is what the package's tests share: the real Cluster API manager, anvil's manager
// with the provider, a QEMU pool per architecture whose workload network forwards to the
// workload cluster's apiserver, the node image, and that workload control plane (with
// kube-controller-manager) whose Nodes the guests register themselves.
type rig struct {
	state    string
	workload *controlplane.ControlPlane
	// workloadClient only reads the workload cluster: no test writes a Node.
	workloadClient client.Client
	workloadAdmin  kubernetes.Interface
	kubeconfig     []byte
	// image is the node image (the test OS with anvil-node-agent), pinned.
	image string
	// osDir and agents are what image was made of (make testos, the built agents).
	osDir, agents string
	// extension is where anvil's in-place update extension listens; Cluster API's manager
	// runs with clusterapi.InPlaceGates() and the client certificate it trusts, and uses it
	// once a test registers it (capienv.RegisterExtension).
	extension extension.Options
	// capi is Cluster API's manager (its kubeconfig is the management cluster's, for clusterctl).
	capi *capienv.CAPI
}

var (
	sharedOnce sync.Once
	shared     *rig
	sharedErr  error
)

// theRig starts the rig on first use (t builds the agents); it stops with the package's
// control plane.
func theRig(t testing.TB) *rig {
	t.Helper()
	sharedOnce.Do(func() {
		// Stays when startRig ends the first test (t.Fatal): the others fail saying so.
		sharedErr = errors.New("the rig failed to start in an earlier test")
		start := time.Now()
		shared, sharedErr = startRig(t)
		t.Logf("rig started in %s", time.Since(start).Round(100*time.Millisecond))
	})
	if sharedErr != nil {
		t.Fatalf("starting the rig: %v", sharedErr)
	}
	return shared
}

func startRig(t testing.TB) (*rig, error) {
	for _, a := range archs {
		program, err := vm.Binary(a)
		if err != nil {
			return nil, err
		}
		if _, err := exec.LookPath(program); err != nil {
			return nil, fmt.Errorf("%s is missing: run make deps", program)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stops []func()
	r := &rig{osDir: testos.Dir(t)}
	env.BeforeStop(func() {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	})
	// Not t.TempDir(): the rig outlives this test, and QMP socket paths must stay short.
	var err error
	if r.state, err = os.MkdirTemp("", "anvil-cg-"); err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = os.RemoveAll(r.state) })
	// In the rig's folder, not the first test's: later tests build node images from them.
	r.agents = nodeagenttest.BuildAgentsIn(t, filepath.Join(r.state, "agents"), "amd64", "arm64")

	clientCA, certFile, keyFile, err := pki.WriteClientPKI(r.state, 4*time.Hour)
	if err != nil {
		return nil, err
	}
	capi, err := capienv.Start(ctx, env.Config, capienv.Options{FeatureGates: clusterapi.InPlaceGates(),
		Args: append([]string{"--sync-period", capiSyncPeriod.String()}, clusterapi.RuntimeExtensionClientArgs(certFile, keyFile)...)})
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = capi.Stop() })
	r.capi = capi
	if err := r.startWorkload(ctx, &stops); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: guestClass},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("256Mi")}},
	} {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	port, err := harness.LoopbackPort()
	if err != nil {
		return nil, err
	}
	r.extension = extension.Options{BindAddress: fmt.Sprintf("127.0.0.1:%d", port), CertDir: filepath.Join(r.state, "extension"), ClientCAFile: clientCA}
	stopManager, err := capienv.RunAnvilManager(ctx, env.Config, r.extension)
	if err != nil {
		return nil, err
	}
	stops = append(stops, stopManager)
	if err := r.startPools(ctx, &stops); err != nil {
		return nil, err
	}
	if r.image, err = nodeimage.Push(ctx, env.Registry.Host+"/capiguest/node:test", r.osDir, r.agents); err != nil {
		return nil, err
	}
	return r, nil
}

// startWorkload starts the workload cluster's control plane: kube-apiserver with bootstrap
// tokens and the Node authorizer, its serving certificate valid for the guests' forward
// address, and kube-controller-manager with node lifecycle.
func (r *rig) startWorkload(ctx context.Context, stops *[]func()) error {
	guestHost, _, _ := net.SplitHostPort(apiserverGuestAddress)
	cp, err := controlplanes.Start(ctx, filepath.Join(r.state, "workload"),
		&controlplane.Workload{NodeMonitorGracePeriod: gracePeriod, ServingNames: []string{guestHost}})
	if err != nil {
		return fmt.Errorf("workload control plane: %w", err)
	}
	*stops = append(*stops, func() { _ = cp.Stop() })
	r.workload = cp
	if r.kubeconfig, err = os.ReadFile(cp.KubeconfigPath()); err != nil {
		return err
	}
	if r.workloadAdmin, err = kubernetes.NewForConfig(cp.RESTConfig()); err != nil {
		return err
	}
	r.workloadClient, err = client.New(cp.RESTConfig(), client.Options{Scheme: env.Scheme})
	return err
}

// startPools runs a QEMU pool per architecture in-process, as anvil dev does. VMs outlive
// their runtime by design, so the rig's stop kills the QEMU of every machine the pools made.
func (r *rig) startPools(ctx context.Context, stops *[]func()) error {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.workload.RESTConfig().Host, "https://"))
	networks := map[string]qemu.Network{workloadNetwork: {Forwards: []qemu.NetworkForward{
		{Guest: apiserverGuestAddress, Target: net.JoinHostPort("127.0.0.1", port)}}}}
	images := osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}}
	*stops = append(*stops, func() { r.killVMs() })
	for _, a := range archs {
		// The workload network serves the apiserver's forward, so it is reserved until the
		// pool says who may join it: here, every namespace (the clusters' own).
		if err := dev.DeclareNetwork(ctx, env.Config, dev.QemuPoolName(a), computev1alpha1.NetworkAccess{Name: workloadNetwork,
			Tenants: &computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{}}}); err != nil {
			return err
		}
		errs, err := dev.StartQemuPool(ctx, env.Config, r.state, a, images, networks, nil, nil, logr.Discard())
		if err != nil {
			return err
		}
		*stops = append(*stops, capienv.ReportPoolErrors(ctx, dev.QemuPoolName(a), errs))
	}
	return nil
}

// killVMs ends the QEMU of every machine of the rig's pools, found as the qemu runtime
// records it (its pid file, checked against its QMP socket).
func (r *rig) killVMs() {
	pidFiles, _ := filepath.Glob(filepath.Join(r.state, "pools", "*", "vms", "machines", "*", "qemu.pid"))
	for _, f := range pidFiles {
		if p, ok := vmProcess(filepath.Dir(f)); ok {
			if err := p.Kill(filepath.Join(filepath.Dir(f), "qmp.sock"), 2*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "stopping a VM:", err)
			}
		}
	}
}

// vmProcess is the QEMU of the machine whose runtime folder is dir (where its console,
// pid file and QMP socket are).
func vmProcess(dir string) (*vm.Process, bool) {
	return vm.Find(filepath.Join(dir, "qemu.pid"), filepath.Join(dir, "qmp.sock"))
}

// bootstrapScript is the bootstrap data of the clusters' Machines: a first-boot script
// that runs the node agent against the workload apiserver through the network's forward,
// with a bootstrap token; the agent names its Node and sets its providerID from the
// machine's first-boot metadata (local-hostname, provider-id).
func (r *rig) bootstrapScript(t testing.TB) []byte {
	t.Helper()
	return r.agentScript(r.bootstrapToken(t))
}

// bootstrapToken makes a bootstrap token of the workload cluster, valid for an hour.
func (r *rig) bootstrapToken(t testing.TB) string {
	t.Helper()
	token, err := controlplane.CreateBootstrapToken(context.Background(), r.workloadAdmin, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// agentScript is bootstrapScript with a given token.
func (r *rig) agentScript(token string) []byte {
	return fmt.Appendf(nil, `#!/bin/sh
cat >/run/workload-ca.crt <<'EOF'
%sEOF
exec %s --server https://%s --ca-file /run/workload-ca.crt --token %s
`, r.workload.RESTConfig().CAData, nodeimage.AgentPath, apiserverGuestAddress, token)
}

// machineSpec is an AnvilMachine of the node image for arch, with one NIC on the workload
// network.
func (r *rig) machineSpec(arch computev1alpha1.Architecture) infrav1.AnvilMachineSpec {
	return infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: guestClass},
		Image: r.image, Architecture: arch,
		NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{Name: "eth0", Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{
			NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{Spec: computev1alpha1.NetworkInterfaceSpec{Network: workloadNetwork}}}}}}
}
