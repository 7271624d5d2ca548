package loadbalancer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

var (
	macA1 = net.HardwareAddr{0x52, 0x54, 0, 0xa, 0, 1}
	macA2 = net.HardwareAddr{0x52, 0x54, 0, 0xa, 0, 2}
	macA3 = net.HardwareAddr{0x52, 0x54, 0, 0xa, 0, 3}
	macB1 = net.HardwareAddr{0x52, 0x54, 0, 0xb, 0, 1}
	macB2 = net.HardwareAddr{0x52, 0x54, 0, 0xb, 0, 2}
)

var apiServers = map[string]string{"role": "api"}

// The host and a machine of the namespace reach the selected machines' port through the
// load balancer, at the same port; a machine that stops answering is passed over; a
// restarted server listens again at the port the status records.
func TestHostAndMachinesReachTheSelectedMachines(t *testing.T) {
	f := newFixture(t)
	ns := namespace(t, "team-a")
	f.guest(ns, "api-1", netip.MustParseAddr("10.200.0.10"), macA1)
	api2 := f.guest(ns, "api-2", netip.MustParseAddr("10.200.0.11"), macA2)
	client1 := f.guest(ns, "client", netip.MustParseAddr("10.200.0.12"), macA3)
	machine(t, ns, "api-1", apiServers, "10.200.0.10")
	machine(t, ns, "worker", map[string]string{"role": "worker"}, "10.200.0.12")
	lb := loadBalancer(t, ns, "api", network, apiServers)

	st := waitStatus(t, lb, "endpoint and segment endpoint", func(s computev1alpha1.LoadBalancerStatus) bool {
		return s.Endpoint != nil && s.SegmentEndpoint != nil && len(s.Backends) == 1
	})
	if st.Endpoint.Host != "127.0.0.1" || uint16(st.Endpoint.Port) != f.ports.First {
		t.Errorf("endpoint %+v, want 127.0.0.1:%d (the range's first port)", *st.Endpoint, f.ports.First)
	}
	if st.SegmentEndpoint.Host != "10.200.0.1" || st.SegmentEndpoint.Port != st.Endpoint.Port {
		t.Errorf("segment endpoint %+v, want the gateway at the endpoint's port", *st.SegmentEndpoint)
	}
	if st.Backends[0] != "10.200.0.10:6443" {
		t.Errorf("backends %v, want [10.200.0.10:6443]: the selected machine's segment address, not the worker's, not its other address", st.Backends)
	}
	if c := ready(st); c == nil || c.Status != "True" || c.Reason != computev1alpha1.ReasonServing {
		t.Errorf("Ready %+v, want True/Serving", c)
	}
	hostAddr := fmt.Sprintf("127.0.0.1:%d", st.Endpoint.Port)
	segAddr := fmt.Sprintf("10.200.0.1:%d", st.SegmentEndpoint.Port)
	eventually(t, "the host reaches api-1", says(fromHost(hostAddr), "api-1"))
	eventually(t, "a machine of the namespace reaches api-1 at the gateway", says(fromGuest(client1.netns, segAddr), "api-1"))

	// A second API server: connections go to both, one after the other.
	machine(t, ns, "api-2", apiServers, "10.200.0.11")
	waitStatus(t, lb, "two backends", func(s computev1alpha1.LoadBalancerStatus) bool { return len(s.Backends) == 2 })
	seen := map[string]bool{}
	for range 6 {
		got, err := answer(fromHost(hostAddr))
		if err != nil {
			t.Fatal(err)
		}
		seen[got] = true
	}
	if !seen["api-1"] || !seen["api-2"] {
		t.Errorf("six connections reached %v, want both API servers", seen)
	}

	// api-2's server stops answering (its port closes): every connection reaches api-1.
	api2.api.Close()
	for range 4 {
		if err := says(fromHost(hostAddr), "api-1")(); err != nil {
			t.Fatalf("with api-2 down: %v", err)
		}
	}

	// The process serving load balancers restarts: the same port again.
	f.cancel()
	if _, err := net.DialTimeout("tcp", hostAddr, time.Second); err == nil {
		t.Fatal("the endpoint still accepts connections with its server stopped")
	}
	f.start()
	eventually(t, "the host reaches api-1 after a restart", says(fromHost(hostAddr), "api-1"))
	eventually(t, "a machine reaches api-1 after a restart", says(fromGuest(client1.netns, segAddr), "api-1"))

	// Deleted: nothing listens.
	if err := env.Client.Delete(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the endpoint closes with its LoadBalancer", func() error {
		if c, err := net.DialTimeout("tcp", hostAddr, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("%s still accepts connections", hostAddr)
		}
		return nil
	})
}

// A tenant reaches only its own machines: its load balancer selecting another namespace's
// machines' labels gets its own; another namespace's port at its gateway is closed; a
// network that is not a segment is refused, saying why.
func TestAnotherNamespacesMachinesAreNeverReached(t *testing.T) {
	f := newFixture(t)
	a, b := namespace(t, "team-a"), namespace(t, "team-b")
	// One subnet, one address, two segments.
	f.guest(a, "a-api", netip.MustParseAddr("10.200.0.10"), macA1)
	f.guest(b, "b-api", netip.MustParseAddr("10.200.0.10"), macB1)
	bClient := f.guest(b, "b-client", netip.MustParseAddr("10.200.0.11"), macB2)
	machine(t, a, "api", apiServers, "10.200.0.10")
	machine(t, b, "api", apiServers, "10.200.0.10")
	aLB := loadBalancer(t, a, "api", network, apiServers)
	aSt := waitStatus(t, aLB, "an endpoint", func(s computev1alpha1.LoadBalancerStatus) bool { return s.Endpoint != nil && len(s.Backends) == 1 })
	bLB := loadBalancer(t, b, "steal", network, apiServers)
	bSt := waitStatus(t, bLB, "an endpoint", func(s computev1alpha1.LoadBalancerStatus) bool { return s.Endpoint != nil && len(s.Backends) == 1 })
	if aSt.Endpoint.Port == bSt.Endpoint.Port {
		t.Fatalf("both load balancers were given port %d", aSt.Endpoint.Port)
	}
	aHost := fmt.Sprintf("127.0.0.1:%d", aSt.Endpoint.Port)
	bHost := fmt.Sprintf("127.0.0.1:%d", bSt.Endpoint.Port)
	eventually(t, "team-a's endpoint reaches team-a's machine", says(fromHost(aHost), "a-api"))
	for range 4 {
		if err := says(fromHost(bHost), "b-api")(); err != nil {
			t.Fatalf("team-b's endpoint: %v (it must reach team-b's machine only)", err)
		}
	}
	// team-a's port at team-b's gateway: nothing listens there.
	aOnB := fmt.Sprintf("10.200.0.1:%d", aSt.Endpoint.Port)
	if got, err := answer(fromGuest(bClient.netns, aOnB)); err == nil {
		t.Fatalf("team-b's machine reached %q at team-a's port on its gateway", got)
	}
	eventually(t, "team-b's machine reaches its own", says(fromGuest(bClient.netns, fmt.Sprintf("10.200.0.1:%d", bSt.Endpoint.Port)), "b-api"))

	bad := loadBalancer(t, b, "elsewhere", "not-a-segment", apiServers)
	st := waitStatus(t, bad, "a Ready condition", func(s computev1alpha1.LoadBalancerStatus) bool { return ready(s) != nil })
	if c := ready(st); c.Status != "False" || c.Reason != computev1alpha1.ReasonNoSuchSegment || st.Endpoint != nil {
		t.Errorf("a load balancer on network not-a-segment: Ready %+v, endpoint %+v; want False/NoSuchSegment and no endpoint", c, st.Endpoint)
	}
}

// A port of the range another process holds is passed over.
func TestAPortHeldElsewhereIsPassedOver(t *testing.T) {
	f := newFixture(t)
	held, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", f.ports.First))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ns := namespace(t, "team-c")
	lb := loadBalancer(t, ns, "api", network, apiServers)
	st := waitStatus(t, lb, "an endpoint", func(s computev1alpha1.LoadBalancerStatus) bool { return s.Endpoint != nil })
	if uint16(st.Endpoint.Port) != f.ports.First+1 {
		t.Errorf("endpoint port %d, want %d: the first is held by another listener", st.Endpoint.Port, f.ports.First+1)
	}
	if c := ready(st); c == nil || c.Status != "True" {
		t.Errorf("Ready %+v, want True", c)
	}
}
