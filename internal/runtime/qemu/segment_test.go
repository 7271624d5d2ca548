package qemu

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// segmentProbe is a test OS script: its address, then, once every address of want answers
// (or after wait seconds), whether the gateway and each of want answer a ping.
func segmentProbe(wait int, want ...string) string {
	s := "#!/bin/sh\nip -4 -o addr show\n"
	s += fmt.Sprintf("end=$(( $(date +%%s) + %d ))\n", wait)
	s += fmt.Sprintf("for ip in %s; do\n\twhile ! ping -c 1 -W 1 $ip >/dev/null 2>&1 && [ $(date +%%s) -lt $end ]; do sleep 1; done\ndone\n", strings.Join(want, " "))
	s += fmt.Sprintf("for ip in 10.200.0.1 %s; do\n\tif ping -c 1 -W 2 $ip >/dev/null 2>&1; then echo \"== reached $ip\"; else echo \"== unreached $ip\"; fi\ndone\n", strings.Join(want, " "))
	return s
}

// createIn creates a machine labelled as a Machine of namespace.
func createIn(t *testing.T, rt *Runtime, namespace, uid string, spec *mriv1alpha1.MachineSpec) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid, mri.LabelMachineNamespace: namespace}}, Spec: spec}})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	return resp.Machine
}

// internalIPs are a machine's InternalIP addresses.
func internalIPs(m *mriv1alpha1.Machine) []string {
	var out []string
	for _, a := range m.GetStatus().GetAddresses() {
		if a.GetType() == "InternalIP" {
			out = append(out, a.GetAddress())
		}
	}
	return out
}

// Two VMs of one namespace on a segment network get addresses from the switch's DHCP and
// reach each other and the gateway, and still do after the runtime restarts; a VM of
// another namespace on the same network gets a segment of its own, with the same first
// address, and reaches neither of them.
func TestSegmentJoinsOneNamespacesVMsAndNoOneElse(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.Networks = map[string]Network{"nodes": {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}}}
	rt := newRuntime(t, cfg)

	spec := func(script string) *mriv1alpha1.MachineSpec {
		s := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
		s.NetworkInterfaces[0].Network = "nodes"
		s.FirstBoot.Data = []byte(script)
		return s
	}
	peers := []string{"10.200.0.2", "10.200.0.3"}
	a1 := createIn(t, rt, "team-a", "a1", spec(segmentProbe(180, peers...)))
	a2 := createIn(t, rt, "team-a", "a2", spec(segmentProbe(180, peers...)))
	var ips []string
	for _, m := range []*mriv1alpha1.Machine{a1, a2} {
		running := await(t, rt, m.Metadata.Id, "running", isRunning)
		out := scriptOutput(t, running.Status.Console)
		t.Logf("%s:\n%s", m.Metadata.Id, out)
		got := probeSections(out)
		for _, ip := range append([]string{"10.200.0.1"}, peers...) {
			if _, ok := got["reached "+ip]; !ok {
				t.Errorf("%s did not reach %s", m.Metadata.Id, ip)
			}
		}
		addrs := internalIPs(running)
		if len(addrs) != 1 || !slices.Contains(peers, addrs[0]) || !strings.Contains(out, "inet "+addrs[0]+"/24") {
			t.Errorf("%s reports addresses %v; want one of %v, the guest's own", m.Metadata.Id, addrs, peers)
		}
		ips = append(ips, addrs...)
	}
	if len(ips) == 2 && ips[0] == ips[1] {
		t.Errorf("both VMs got %s", ips[0])
	}

	// The runtime restarts (its switch with it) while the VMs run: they join their segment
	// again with their addresses, so a third VM of the namespace gets the next address and
	// reaches both.
	rt.Close()
	rt = newRuntime(t, cfg)
	a3 := createIn(t, rt, "team-a", "a3", spec(segmentProbe(180, append(peers, "10.200.0.4")...)))
	running := await(t, rt, a3.Metadata.Id, "running", isRunning)
	out := scriptOutput(t, running.Status.Console)
	t.Logf("%s, after the runtime restarted:\n%s", a3.Metadata.Id, out)
	got := probeSections(out)
	for _, ip := range peers {
		if _, ok := got["reached "+ip]; !ok {
			t.Errorf("after a restart, a new VM did not reach %s", ip)
		}
	}
	if addrs := internalIPs(running); !slices.Equal(addrs, []string{"10.200.0.4"}) {
		t.Errorf("after a restart, a new VM got %v, want 10.200.0.4 (the running VMs keep theirs)", addrs)
	}

	b1 := createIn(t, rt, "team-b", "b1", spec(segmentProbe(5, peers...)))
	running = await(t, rt, b1.Metadata.Id, "running", isRunning)
	out = scriptOutput(t, running.Status.Console)
	t.Logf("%s (another namespace):\n%s", b1.Metadata.Id, out)
	got = probeSections(out)
	if addrs := internalIPs(running); !slices.Equal(addrs, []string{"10.200.0.2"}) {
		t.Errorf("the other namespace's VM reports %v, want 10.200.0.2, the first address of a segment of its own", addrs)
	}
	if _, ok := got["reached 10.200.0.1"]; !ok {
		t.Errorf("the other namespace's VM did not reach its own gateway")
	}
	if _, ok := got["unreached 10.200.0.3"]; !ok {
		t.Errorf("the other namespace's VM reached team-a's 10.200.0.3: %q", out)
	}
}

// A machine that does not say its namespace cannot join a segment: its segment could not
// be told from another tenant's.
func TestSegmentNeedsTheMachinesNamespace(t *testing.T) {
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.Networks = map[string]Network{"nodes": {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}}}
	rt := newRuntime(t, cfg)
	spec := machineSpec(testImage{Reference: "127.0.0.1:1/x:y", Digest: "sha256:" + strings.Repeat("0", 64)}, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.NetworkInterfaces[0].Network = "nodes"
	_, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: "x"}}, Spec: spec}})
	if err == nil || !strings.Contains(err.Error(), mri.LabelMachineNamespace) {
		t.Errorf("CreateMachine without a namespace label = %v, want a refusal naming %s", err, mri.LabelMachineNamespace)
	}
}

func TestCheckSegment(t *testing.T) {
	for name, n := range map[string]Network{
		"ipv6":       {Segment: &Segment{Subnet: netip.MustParsePrefix("fd00::/64")}},
		"too narrow": {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/31")}},
		"no subnet":  {Segment: &Segment{}},
		"forwards":   {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}, Forwards: []NetworkForward{{Guest: "10.0.2.100:1", Target: "127.0.0.1:1"}}},
		"outbound":   {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}, Outbound: true},
	} {
		if err := checkNetworks(map[string]Network{"n": n}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkNetworks(map[string]Network{"n": {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}}}); err != nil {
		t.Error(err)
	}
}
