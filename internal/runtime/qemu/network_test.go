package qemu

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// TestMain lets the test binary serve as the guest-forward command QEMU runs (what
// `anvil forward` is outside tests): `<test binary> forward [--machine ID
// --max-connections N] HOST:PORT`, taking the machine's slot as anvil forward does.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "forward" {
		if ServeForwardArgs(os.Args[2:], os.Stdin, os.Stdout) != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hostService is a TCP listener on the host's loopback that greets each connection with
// its name and counts them: a stand-in for etcd or the registry of `anvil dev`.
type hostService struct {
	name  string
	l     net.Listener
	conns atomic.Int32
}

func listenHostService(t *testing.T, name string) *hostService {
	t.Helper()
	return listenService(t, name, "127.0.0.1:0")
}

// listenService is a hostService listening on addr.
func listenService(t *testing.T, name, addr string) *hostService {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &hostService{name: name, l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			fmt.Fprintf(c, "hello-from-%s\n", name)
			c.Close()
		}
	}()
	return s
}

func (s *hostService) port() int { return s.l.Addr().(*net.TCPAddr).Port }

// forwardCommandForTest is the test binary as the forward command (see TestMain), copied
// where QEMU's user may run it (go's build folder is root's alone).
func forwardCommandForTest(t *testing.T, cfg Config) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(cfg.StateDir)
	if err := os.Chmod(root, 0o711); err != nil { // QEMU's user runs the command from here
		t.Fatal(err)
	}
	bin := filepath.Join(root, "forward.test")
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{bin, "forward"}
}

// probeScript is a guest's user data that tries each address with busybox nc and prints
// what answered.
func probeScript(addrs ...string) []byte {
	s := "#!/bin/sh\n"
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		s += fmt.Sprintf("echo probe | nc -w 2 %s %s && echo connected-%s\n", host, port, a)
	}
	return []byte(s + "exit 0\n")
}

// scriptOutput waits for the guest's user data script to finish and returns its output.
func scriptOutput(t *testing.T, console string) string {
	t.Helper()
	awaitConsole(t, console, "ANVIL-TESTOS-SCRIPT-END")
	raw, _ := os.ReadFile(console)
	out := string(raw)
	if i := strings.Index(out, "ANVIL-TESTOS-SCRIPT-BEGIN"); i >= 0 {
		out = out[i:]
	}
	if i := strings.Index(out, "ANVIL-TESTOS-SCRIPT-END"); i >= 0 {
		out = out[:i]
	}
	return out
}

// A hostile guest tries the host's loopback (where `anvil dev` serves etcd, the registry
// and other VMs' SSH forwards) at QEMU's gateway 10.0.2.2: from a NIC on the default
// network, and from a NIC on a network the pool gives one forward, where the forward must
// reach its service and nothing else may answer.
func TestGuestReachesOnlyItsForwards(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	secret := listenHostService(t, "loopback")   // on the host, given to no network
	service := listenHostService(t, "forwarded") // the target of the pool's one forward
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.Networks = map[string]Network{"services": {Forwards: []NetworkForward{{Guest: "10.0.2.100:8080", Target: service.l.Addr().String()}}}}
	cfg.ForwardCommand = forwardCommandForTest(t, cfg)
	rt := newRuntime(t, cfg)

	gateway := func(s *hostService) string { return fmt.Sprintf("10.0.2.2:%d", s.port()) }
	plain := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	plain.FirstBoot.Data = probeScript(gateway(secret), gateway(service))
	given := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	given.NetworkInterfaces[0].Network = "services"
	given.FirstBoot.Data = probeScript("10.0.2.100:8080", gateway(secret))

	plainM := create(t, rt, "plain", plain)
	givenM := create(t, rt, "given", given)
	plainOut := scriptOutput(t, await(t, rt, plainM.Metadata.Id, "ran", isRunning).Status.Console)
	givenOut := scriptOutput(t, await(t, rt, givenM.Metadata.Id, "ran", isRunning).Status.Console)
	t.Logf("guest on the default network:\n%s\nguest on the network with a forward:\n%s", plainOut, givenOut)

	if strings.Contains(plainOut, "hello-from-") || strings.Contains(plainOut, "connected-") {
		t.Errorf("a guest on the default network reached the host's loopback through 10.0.2.2:\n%s", plainOut)
	}
	if !strings.Contains(givenOut, "hello-from-forwarded") {
		t.Errorf("the guest's forward 10.0.2.100:8080 did not reach its service:\n%s", givenOut)
	}
	if strings.Contains(givenOut, "hello-from-loopback") || strings.Contains(givenOut, "connected-"+gateway(secret)) {
		t.Errorf("a guest on a network with a forward reached a host service it was not given:\n%s", givenOut)
	}
	if n := secret.conns.Load(); n != 0 {
		t.Errorf("the host service no network is given was connected to %d times", n)
	}
	// The runtime's own host-to-guest forward still works on a restricted NIC.
	checkSSHForward(t, get(t, rt, plainM.Metadata.Id))
}

// The runtime declares its networks over MRI (the poollet writes them to the pool's
// status): each with its forwards, sorted by name, and which have outbound access.
func TestStatusDeclaresNetworks(t *testing.T) {
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.ForwardCommand = []string{"/bin/true"}
	cfg.Networks = map[string]Network{
		"z-db":     {Forwards: []NetworkForward{{Guest: "10.0.2.50:5432", Target: "127.0.0.1:5432"}}, Outbound: true},
		"builders": {Forwards: []NetworkForward{{Guest: "10.0.2.100:5000", Target: "127.0.0.1:5001"}}},
		"internet": {Outbound: true},
		"nodes":    {Segment: &Segment{Subnet: netip.MustParsePrefix("10.200.0.0/24")}},
	}
	st, err := newRuntime(t, cfg).Status(context.Background(), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range st.Networks {
		got = append(got, fmt.Sprintf("%s nat=%v", n.Name, n.Nat))
		if n.Segment != "" {
			got = append(got, n.Name+" segment "+n.Segment)
		}
		for _, f := range n.Forwards {
			got = append(got, fmt.Sprintf("%s %s->%s", n.Name, f.Guest, f.Target))
		}
	}
	want := []string{"builders nat=false", "builders 10.0.2.100:5000->127.0.0.1:5001", "internet nat=true", "nodes nat=false", "nodes segment 10.200.0.0/24", "z-db nat=true", "z-db 10.0.2.50:5432->127.0.0.1:5432"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("Status networks = %q, want %q", got, want)
	}
}
