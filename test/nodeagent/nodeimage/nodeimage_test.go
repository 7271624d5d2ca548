package nodeimage

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/nodeagent"
	"github.com/anvil-dev/anvil/test/nodeagent/nodeagenttest"
	"github.com/anvil-dev/anvil/test/testos"
)

// The qemu runtime runs this test binary as its guest-forward command (`anvil forward`).
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "forward" {
		if qemu.ServeForwardArgs(os.Args[2:], os.Stdin, os.Stdout) != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// apiserverGuestAddress is where the guests reach the workload apiserver: a forward of
// their network, the one way out of a restricted NIC.
const apiserverGuestAddress = "10.0.2.100:6443"

// bootTimeout is generous: TCG guests, two at once, on a shared 2-core machine.
const bootTimeout = 4 * time.Minute

// The node image (the test OS with anvil-node-agent) boots under the qemu runtime for amd64
// and arm64 on a network whose only way out is a forward to the workload apiserver's
// loopback port; each guest's first-boot script runs the agent with a bootstrap token, and
// each registers its own Node: Ready, its kubernetes.io/arch the guest's, its provider ID,
// its name from the seed's local-hostname. The same script finds the apiserver's port on the
// host's loopback (QEMU's gateway 10.0.2.2) closed to it. The apiserver's serving
// certificate names 10.0.2.100 (Workload.ServingNames): the agent checks it like any client.
func TestNodeImageGuestsRegisterTheirNodes(t *testing.T) {
	ctx := context.Background()
	archs := []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}
	for _, a := range archs {
		bin, err := vm.Binary(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: run make deps", bin)
		}
	}
	guestHost, _, _ := net.SplitHostPort(apiserverGuestAddress)
	cp := nodeagenttest.StartWorkload(t, controlplane.Workload{ServingNames: []string{guestHost}})
	admin := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	token, err := controlplane.CreateBootstrapToken(ctx, admin, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	apiserver := strings.TrimPrefix(cp.RESTConfig().Host, "https://")

	reg, err := registry.Start(ctx, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	agents := nodeagenttest.BuildAgents(t, "amd64", "arm64")
	pinned, err := Push(ctx, reg.Host+"/anvil/node:test", testos.Dir(t), agents)
	if err != nil {
		t.Fatal(err)
	}
	repo, digest, _ := strings.Cut(pinned, "@")

	rt := newRuntime(t, archs, map[string]qemu.Network{"workload": {Forwards: []qemu.NetworkForward{{Guest: apiserverGuestAddress, Target: apiserver}}}})
	_, port, _ := net.SplitHostPort(apiserver)
	ids := map[computev1alpha1.Architecture]string{}
	for _, a := range archs {
		name := "node-" + string(a)
		script := fmt.Sprintf(`#!/bin/sh
echo probe | nc -w 2 10.0.2.2 %s && echo REACHED-THE-HOST-LOOPBACK
cat >/run/workload-ca.crt <<'EOF'
%sEOF
exec %s --server https://%s --ca-file /run/workload-ca.crt --token %s --provider-id anvil://nodes/%s --labels anvil.dev/test=node-image
`, port, cp.RESTConfig().CAData, AgentPath, apiserverGuestAddress, token, name)
		resp, err := rt.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: name}},
			Spec: &mriv1alpha1.MachineSpec{
				Class: "small", Hostname: name,
				Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 256 << 20},
				Image:             &mriv1alpha1.Image{Reference: repo, Digest: digest},
				Architecture:      mri.ArchToMRI(a),
				Power:             mriv1alpha1.Power_POWER_ON,
				Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: 64 << 20}}}},
				NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "workload"}},
				FirstBoot:         &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte(script)},
			},
		}})
		if err != nil {
			t.Fatalf("CreateMachine %s: %v", name, err)
		}
		id := resp.Machine.Metadata.Id
		ids[a] = id
		t.Cleanup(func() { deleteMachine(t, rt, id) })
	}

	start := time.Now()
	for _, a := range archs {
		name := "node-" + string(a)
		console := awaitConsole(t, rt, ids[a], nodeagent.RegisteredLine(name, "anvil://nodes/"+name))
		t.Logf("%s registered (seen %s after the machines were created); its first-boot script said:\n%s", name,
			time.Since(start).Round(100*time.Millisecond), console[strings.Index(console, "ANVIL-TESTOS-SCRIPT-BEGIN"):])
		if strings.Contains(console, "REACHED-THE-HOST-LOOPBACK") {
			t.Errorf("guest %s reached the apiserver's port on the host's loopback through 10.0.2.2:\n%s", name, console)
		}
		node, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Node %s: %v\nconsole:\n%s", name, err, console)
		}
		ready := corev1.ConditionStatus("")
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status
			}
		}
		if ready != corev1.ConditionTrue || node.Labels["kubernetes.io/arch"] != string(a) || node.Status.NodeInfo.Architecture != string(a) ||
			node.Spec.ProviderID != "anvil://nodes/"+name || node.Labels["anvil.dev/test"] != "node-image" {
			t.Errorf("Node %s: Ready=%s, arch label %q, nodeInfo.architecture %q, providerID %q, labels %v; want Ready, %s, anvil://nodes/%s",
				name, ready, node.Labels["kubernetes.io/arch"], node.Status.NodeInfo.Architecture, node.Spec.ProviderID, node.Labels, a, name)
		}
		t.Logf("Node %s: addresses %v, kernel %s", name, node.Status.Addresses, node.Status.NodeInfo.KernelVersion)
	}
}

// newRuntime is a qemu runtime on fresh folders with networks, closed when the test ends.
func newRuntime(t *testing.T, archs []computev1alpha1.Architecture, networks map[string]qemu.Network) *qemu.Runtime {
	t.Helper()
	// Not t.TempDir(): long test names would push QMP socket paths past Linux's limit.
	root, err := os.MkdirTemp("", "anvil-nodeimage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	policy := registrynet.Policy{Allow: registrynet.Loopback}
	cache, err := osimage.NewCache(filepath.Join(root, "cache"), osimage.CacheOptions{Network: policy})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := qemu.New(qemu.Config{
		Name: "qemu", StateDir: filepath.Join(root, "state"), Architectures: archs, Networks: networks,
		Images: cache, Index: &imageref.Registry{Transport: policy.Transport()}, Seeds: nocloud.WriteISO,
		Logger: testr.NewWithInterface(t, testr.Options{Verbosity: 1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// awaitConsole waits for line on the machine's console and returns the console; the
// first-boot script's end (the agent exited) fails the test at once.
func awaitConsole(t *testing.T, rt *qemu.Runtime, id, line string) string {
	t.Helper()
	deadline := time.Now().Add(bootTimeout)
	var console string
	for time.Now().Before(deadline) {
		resp, err := rt.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Machines) == 1 && resp.Machines[0].Status.GetConsole() != "" {
			raw, _ := os.ReadFile(resp.Machines[0].Status.Console)
			if console = string(raw); strings.Contains(console, line) {
				return console
			}
			if strings.Contains(console, "ANVIL-TESTOS-SCRIPT-END") {
				t.Fatalf("machine %s: the first-boot script ended before %q; console:\n%s", id, line, console)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("machine %s printed no %q within %s; console:\n%s", id, line, bootTimeout, console)
	return ""
}

// deleteMachine deletes a machine and waits until the runtime no longer lists it (its QEMU
// stopped).
func deleteMachine(t *testing.T, rt *qemu.Runtime, id string) {
	ctx := context.Background()
	if _, err := rt.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Errorf("deleting machine %s: %v", id, err)
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		resp, err := rt.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{Id: id})
		if err == nil && len(resp.Machines) == 0 {
			return
		}
	}
	t.Errorf("machine %s still listed a minute after its deletion", id)
}
