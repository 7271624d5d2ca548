package capiguest_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/anvilmachine"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/nodeagent"
)

// clusterName is the one Cluster the package's tests share; each adds its own
// MachineDeployments to it.
const clusterName = "guests"

// bootstrapSecret names the Cluster's bootstrap data Secret (bootstrapScript).
const bootstrapSecret = "node-agent"

// testCluster is the shared Cluster, its control-plane Machine made with it.
type testCluster struct {
	*clusterv1.Cluster
	// controlPlane is the control-plane Machine's name.
	controlPlane string
}

var (
	clusterOnce sync.Once
	cluster     *testCluster
	clusterErr  error
)

// theCluster makes, on first use, a namespace with the Cluster whose Machines boot the node
// agent's script and its control-plane Machine, an amd64 VM, and waits until that Machine
// is healthy and so the Cluster's control plane initialized: Cluster API looks at no other
// Machine's Node before.
func theCluster(t testing.TB, r *rig) *testCluster {
	t.Helper()
	clusterOnce.Do(func() {
		// Stays when making it ends the first test (t.Fatal): the others fail saying so.
		clusterErr = errors.New("the Cluster was not made in an earlier test")
		ctx := context.Background()
		ns := capienv.Namespace(t, env.Client, "capiguest")
		endpoint, err := capienv.Endpoint(r.workload.RESTConfig())
		if err != nil {
			clusterErr = err
			return
		}
		c, objs := capienv.Cluster(ns, clusterName, r.kubeconfig, endpoint)
		objs = append(objs, capienv.BootstrapSecret(c, bootstrapSecret, r.bootstrapScript(t)))
		objs = append(objs, capienv.ControlPlaneMachine(c, "cp-0", bootstrapSecret, r.machineSpec(computev1alpha1.ArchitectureAMD64))...)
		start := time.Now()
		if clusterErr = capienv.Create(ctx, env.Client, objs...); clusterErr != nil {
			return
		}
		cluster = &testCluster{Cluster: c, controlPlane: "cp-0"}
		clusterErr = capienv.Poll(bootTimeout, func() error {
			m := &clusterv1.Machine{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.controlPlane}, m); err != nil {
				return err
			}
			if err := capienv.Healthy(m); err != nil {
				return err
			}
			cl := &clusterv1.Cluster{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), cl); err != nil {
				return err
			}
			if cond := apimeta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition); cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("Cluster ControlPlaneInitialized %+v", cond)
			}
			return nil
		})
		t.Logf("Cluster %s/%s: control plane initialized %s after its objects were made", ns, c.Name, time.Since(start).Round(100*time.Millisecond))
	})
	if clusterErr != nil {
		t.Fatalf("the Cluster with its control-plane Machine: %v", clusterErr)
	}
	return cluster
}

// waitHealthy waits until md has exactly n Machines, each Running with a nodeRef and
// NodeHealthy, and returns them.
func waitHealthy(t testing.TB, md *clusterv1.MachineDeployment, n int) []clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	var machines []clusterv1.Machine
	start := time.Now()
	err := capienv.Poll(bootTimeout, func() error {
		var err error
		if machines, err = capienv.MachinesOf(ctx, env.Client, md); err != nil {
			return err
		}
		if len(machines) != n {
			return fmt.Errorf("%d Machines", len(machines))
		}
		for i := range machines {
			if err := capienv.Healthy(&machines[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for i := range machines {
			logGuest(t, &machines[i])
		}
		t.Fatalf("MachineDeployment %s at %d healthy Machines: %v", md.Name, n, err)
	}
	t.Logf("%s: %d healthy Machines after %s", md.Name, n, time.Since(start).Round(100*time.Millisecond))
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return machines
}

// logGuest logs what a Machine that did not become healthy shows: its conditions, its anvil
// Machine's state and its console's last lines (did the guest boot, reach the apiserver,
// register?), so a failure says where the way stopped.
func logGuest(t testing.TB, m *clusterv1.Machine) {
	t.Helper()
	t.Logf("Machine %s: phase %q, nodeRef %q, providerID %q, conditions %+v", m.Name, m.Status.Phase, m.Status.NodeRef.Name, m.Spec.ProviderID, m.Status.Conditions)
	ns, name, err := anvilmachine.ParseProviderID(m.Spec.ProviderID)
	if err != nil {
		return
	}
	vmm := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vmm); err != nil {
		t.Logf("anvil Machine %s/%s: %v", ns, name, err)
		return
	}
	t.Logf("anvil Machine %s/%s: %s on %s, conditions %+v", ns, name, vmm.Status.State, vmm.Status.Pool, vmm.Status.Conditions)
	if shared == nil {
		return
	}
	if raw, err := os.ReadFile(filepath.Join(shared.vmDir(vmm), qemu.ConsoleLogFile)); err == nil {
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		t.Logf("its console's last lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// guestVM is what the test reads of the VM under a Cluster API Machine.
type guestVM struct {
	anvil   *computev1alpha1.Machine
	dir     string // the VM's runtime folder on this host (its console log, pid file, QMP socket)
	console string // the console's text when read
	node    *corev1.Node
}

// consoleLog is the VM's console log file: the rig reads its own host's files (tenants
// read the console API, docs/console.md).
func (g guestVM) consoleLog() string { return filepath.Join(g.dir, qemu.ConsoleLogFile) }

// assertGuestNode checks that the Node of a healthy Machine was registered by its own guest,
// a VM of arch: the anvil Machine runs on arch; the Node is named after the VM's hostname,
// carries the Machine's providerID and the guest's architecture (label and nodeInfo) and
// address; the agent printed its registration on that VM's console; and the Node's
// credentials came from a certificate request the workload cluster approved for a bootstrap
// token user, asking for system:node:<name>. The test itself never writes a Node.
func assertGuestNode(t testing.TB, r *rig, m *clusterv1.Machine, arch computev1alpha1.Architecture) guestVM {
	t.Helper()
	ctx := context.Background()
	g := guestVM{anvil: &computev1alpha1.Machine{}, node: &corev1.Node{}}
	// By its providerID: with an identityRef the anvil Machine is in another namespace (of
	// another management cluster after a move) than the Machine.
	ns, name, err := anvilmachine.ParseProviderID(m.Spec.ProviderID)
	if err != nil {
		t.Fatalf("Machine %s: %v", m.Name, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, g.anvil); err != nil {
		t.Fatalf("the anvil Machine of %s: %v", m.Name, err)
	}
	if g.anvil.Status.State != computev1alpha1.MachineStateRunning || g.anvil.Status.Architecture != arch || g.anvil.Status.MachineID == "" {
		t.Fatalf("anvil Machine %s: %s %s on %s, id %q; want Running %s with an id", g.anvil.Name, g.anvil.Status.State,
			g.anvil.Status.Architecture, g.anvil.Status.Pool, g.anvil.Status.MachineID, arch)
	}
	g.dir = r.vmDir(g.anvil)
	hostname := g.anvil.Spec.Hostname
	if hostname == "" {
		hostname = g.anvil.Name
	}
	if m.Status.NodeRef.Name != hostname {
		t.Errorf("Machine %s has nodeRef %q, want its VM's hostname %q", m.Name, m.Status.NodeRef.Name, hostname)
	}
	if err := r.workloadClient.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, g.node); err != nil {
		t.Fatalf("Node %s of Machine %s: %v", m.Status.NodeRef.Name, m.Name, err)
	}
	n := g.node
	if n.Spec.ProviderID != m.Spec.ProviderID || n.Spec.ProviderID != "anvil://"+g.anvil.Namespace+"/"+g.anvil.Name {
		t.Errorf("Node %s has providerID %q; Machine %s has %q, its anvil Machine is %s/%s", n.Name, n.Spec.ProviderID, m.Name, m.Spec.ProviderID, g.anvil.Namespace, g.anvil.Name)
	}
	if n.Labels[corev1.LabelArchStable] != string(arch) || n.Status.NodeInfo.Architecture != string(arch) {
		t.Errorf("Node %s: label %s=%q, nodeInfo.architecture %q; its VM is %s", n.Name, corev1.LabelArchStable,
			n.Labels[corev1.LabelArchStable], n.Status.NodeInfo.Architecture, arch)
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == vm.GuestAddress }) {
		t.Errorf("Node %s has addresses %v, not the guest's %s", n.Name, n.Status.Addresses, vm.GuestAddress)
	}
	g.console = awaitConsoleLines(t, g, nodeagent.RegisteredLine(n.Name, n.Spec.ProviderID), 1)
	assertBootstrapped(t, r, n.Name)
	return g
}

// awaitConsoleLines is an anvil Machine's console once it shows line at least n times. The
// agent prints its line after the Node is Ready, so a healthy Machine may be seen a moment
// before its console says so (the serial console is written by another process).
func awaitConsoleLines(t testing.TB, g guestVM, line string, n int) string {
	t.Helper()
	var console string
	capienv.Eventually(t, 30*time.Second, fmt.Sprintf("%d of %q on the console of anvil Machine %s", n, line, g.anvil.Name), func() error {
		raw, err := os.ReadFile(g.consoleLog())
		if err != nil {
			return err
		}
		if console = string(raw); strings.Count(console, line) < n {
			return fmt.Errorf("%d so far:\n%s", strings.Count(console, line), console)
		}
		return nil
	})
	return console
}

// assertBootstrapped checks that a certificate request for node's client certificate was
// made by a bootstrap token's user and approved and signed by the workload cluster: the
// node's own TLS bootstrap, as a kubelet's.
func assertBootstrapped(t testing.TB, r *rig, node string) {
	t.Helper()
	csrs, err := r.workloadAdmin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, csr := range csrs.Items {
		block, _ := pem.Decode(csr.Spec.Request)
		if block == nil {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil || req.Subject.CommonName != "system:node:"+node {
			continue
		}
		approved := slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
			return c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue
		})
		if strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
			approved && len(csr.Status.Certificate) > 0 {
			return
		}
		seen = append(seen, fmt.Sprintf("%s by %s (approved %t, signed %t)", csr.Name, csr.Spec.Username, approved, len(csr.Status.Certificate) > 0))
	}
	t.Errorf("no approved and signed certificate request of a bootstrap token's user for system:node:%s; requests for it: %v", node, seen)
}

// awaitGone waits until the anvil Machine of a deleted Machine, its VM's QEMU and its Node
// are gone.
func awaitGone(t testing.TB, r *rig, g guestVM) {
	t.Helper()
	ctx := context.Background()
	capienv.Eventually(t, 2*time.Minute, fmt.Sprintf("anvil Machine %s, its QEMU and Node %s gone", g.anvil.Name, g.node.Name), func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g.anvil), &computev1alpha1.Machine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("anvil Machine %s: %v", g.anvil.Name, err)
		}
		if p, ok := vmProcess(g.dir); ok {
			return fmt.Errorf("its QEMU (pid %d) still runs", p.PID)
		}
		if err := r.workloadClient.Get(ctx, client.ObjectKeyFromObject(g.node), &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Node %s: %v", g.node.Name, err)
		}
		return nil
	})
}

// vmDir is the runtime folder on this host of anvil Machine m's VM, in the rig's QEMU pools.
func (r *rig) vmDir(m *computev1alpha1.Machine) string {
	return dev.QemuMachineDir(r.state, m.Status.Architecture, m.Status.MachineID)
}
