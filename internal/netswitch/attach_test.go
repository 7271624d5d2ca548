package netswitch

import (
	"bytes"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

func TestAttachRefuses(t *testing.T) {
	s, _ := newSwitch(t)
	nics := t.TempDir()
	a := attachNIC(t, s, segA, nics, "a", macA, ipA)
	hw := func(m mac) net.HardwareAddr { return net.HardwareAddr(m[:]) }
	peer := filepath.Join(nics, "new")
	good := Port{Peer: peer, MAC: hw(macC), IP: ipC}
	with := func(f func(*Segment, *Port)) (Segment, Port) { seg, p := segA, good; f(&seg, &p); return seg, p }
	tests := map[string]func(*Segment, *Port){
		"another subnet for the segment":  func(s *Segment, _ *Port) { s.Subnet = netip.MustParsePrefix("10.201.0.0/24") },
		"another gateway for the segment": func(s *Segment, _ *Port) { s.Gateway = netip.MustParseAddr("10.200.0.254") },
		"a name with a slash":             func(s *Segment, _ *Port) { s.Name = "../etc" },
		"an empty name":                   func(s *Segment, _ *Port) { s.Name = "" },
		"a name too long for a socket":    func(s *Segment, _ *Port) { s.Name = strings.Repeat("n", 100) },
		"an IPv6 subnet":                  func(s *Segment, _ *Port) { s.Subnet = netip.MustParsePrefix("fd00::/64") },
		"a /31":                           func(s *Segment, _ *Port) { s.Subnet = netip.MustParsePrefix("10.200.0.0/31") },
		"a gateway outside the subnet":    func(s *Segment, _ *Port) { s.Name, s.Gateway = "other", netip.MustParseAddr("10.9.0.1") },
		"the network address as gateway":  func(s *Segment, _ *Port) { s.Name, s.Gateway = "other", netip.MustParseAddr("10.200.0.0") },
		"an IPv6 DNS server":              func(s *Segment, _ *Port) { s.DNS = []netip.Addr{netip.MustParseAddr("fd00::53")} },
		"the MAC of another port":         func(_ *Segment, p *Port) { p.MAC = hw(macA) },
		"the address of another port":     func(_ *Segment, p *Port) { p.IP = ipA },
		"the gateway's address":           func(_ *Segment, p *Port) { p.IP = testGateway },
		"the broadcast address":           func(_ *Segment, p *Port) { p.IP = netip.MustParseAddr("10.200.0.255") },
		"an address outside the subnet":   func(_ *Segment, p *Port) { p.IP = netip.MustParseAddr("10.201.0.5") },
		"a multicast MAC":                 func(_ *Segment, p *Port) { p.MAC = hw(mac{0x01, 0, 0x5e, 0, 0, 1}) },
		"the switch's own MAC":            func(_ *Segment, p *Port) { p.MAC = hw(gatewayMAC) },
		"a short MAC":                     func(_ *Segment, p *Port) { p.MAC = p.MAC[:4] },
		"a relative peer path":            func(_ *Segment, p *Port) { p.Peer = "a.sock" },
		"an abstract peer address":        func(_ *Segment, p *Port) { p.Peer = "@a" },
		"a peer path too long":            func(_ *Segment, p *Port) { p.Peer = "/" + strings.Repeat("p", 107) },
	}
	for name, f := range tests {
		if _, _, err := s.Attach(with(f)); err == nil {
			t.Errorf("%s: attached", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// None of it changed the segment: a is still alone on it and it still works.
	a.barrier(testGateway)
	if got := s.segments[segA.Name].table.Load().peers; len(got) != 1 {
		t.Fatalf("segment's ports: %v", got)
	}
}

func TestAttachAgain(t *testing.T) {
	n := newTwoTenants(t)
	// The same port again: still one port, and its frames arrive once.
	if _, _, err := n.s.Attach(segA, Port{Peer: n.a.path, MAC: net.HardwareAddr(macA[:]), IP: ipA}); err != nil {
		t.Fatal(err)
	}
	n.b.send(payloadFrame(broadcastMAC, macB, "once"))
	n.a.recv()
	n.b.barrier(testGateway)
	n.a.expectNothing()

	// A new MAC for the same peer replaces the old one.
	newMAC := mac{0x52, 0x54, 0x00, 0, 0, 0xaa}
	if _, _, err := n.s.Attach(segA, Port{Peer: n.a.path, MAC: net.HardwareAddr(newMAC[:]), IP: ipA}); err != nil {
		t.Fatal(err)
	}
	n.b.send(payloadFrame(macA, macB, "to the old MAC"))
	n.b.send(payloadFrame(newMAC, macB, "to the new MAC"))
	if got := n.a.recv(); !bytes.Equal(got, payloadFrame(newMAC, macB, "to the new MAC")) {
		t.Fatalf("a got % x", got)
	}

	// The peer attached to another segment moves there.
	path, _, err := n.s.Attach(segB, Port{Peer: n.a.path, MAC: net.HardwareAddr(newMAC[:]), IP: netip.MustParseAddr("10.200.0.99")})
	if err != nil {
		t.Fatal(err)
	}
	n.a.segment = path
	n.b.send(payloadFrame(broadcastMAC, macB, "to tenant-a"))
	n.b.barrier(testGateway)
	n.a.expectNothing() // a hears nothing of tenant-a any more
	n.a.send(payloadFrame(broadcastMAC, newMAC, "a on tenant-b"))
	if got := n.x.recv(); !bytes.Equal(got, payloadFrame(broadcastMAC, newMAC, "a on tenant-b")) {
		t.Fatalf("x got % x", got)
	}
}

func TestAllocateIP(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	tests := []struct {
		name    string
		subnet  netip.Prefix
		gateway netip.Addr
		taken   []netip.Addr
		want    string // "" for an error
	}{
		{"first after the gateway", p("10.200.0.0/24"), a("10.200.0.1"), nil, "10.200.0.2"},
		{"past taken ones", p("10.200.0.0/24"), a("10.200.0.1"), []netip.Addr{a("10.200.0.2"), a("10.200.0.3")}, "10.200.0.4"},
		{"a hole is filled", p("10.200.0.0/24"), a("10.200.0.1"), []netip.Addr{a("10.200.0.3")}, "10.200.0.2"},
		{"gateway at the top", p("10.200.0.0/24"), a("10.200.0.254"), nil, "10.200.0.1"},
		{"subnet given unmasked", p("10.200.0.77/24"), a("10.200.0.1"), nil, "10.200.0.2"},
		{"taken outside the subnet ignored", p("10.200.0.0/30"), a("10.200.0.1"), []netip.Addr{a("10.9.9.9")}, "10.200.0.2"},
		{"full /30", p("10.200.0.0/30"), a("10.200.0.1"), []netip.Addr{a("10.200.0.2")}, ""},
		{"never the broadcast", p("10.200.0.0/29"), a("10.200.0.1"),
			[]netip.Addr{a("10.200.0.2"), a("10.200.0.3"), a("10.200.0.4"), a("10.200.0.5"), a("10.200.0.6")}, ""},
		{"IPv6", p("fd00::/64"), a("fd00::1"), nil, ""},
		{"/31", p("10.200.0.0/31"), a("10.200.0.1"), nil, ""},
		{"invalid", netip.Prefix{}, a("10.200.0.1"), nil, ""},
	}
	for _, tt := range tests {
		got, err := AllocateIP(tt.subnet, tt.gateway, tt.taken)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: allocated %s", tt.name, got)
		case tt.want != "" && (err != nil || got != a(tt.want)):
			t.Errorf("%s: got %s, %v; want %s", tt.name, got, err, tt.want)
		}
	}
}

func TestSocketPath(t *testing.T) {
	if got := SocketPath("/run/anvil/net", "abc"); got != "/run/anvil/net/abc.sock" {
		t.Fatal(got)
	}
}

// A port attached without an address takes the lowest free one of its segment, never one
// another port holds, and keeps it when attached again; a detached port's address is free.
func TestAttachAllocates(t *testing.T) {
	s, _ := newSwitch(t)
	nics := t.TempDir()
	hw := func(m mac) net.HardwareAddr { return net.HardwareAddr(m[:]) }
	held := Port{Peer: filepath.Join(nics, "held"), MAC: hw(macA), IP: netip.MustParseAddr("10.200.0.2")}
	if _, ip, err := s.Attach(segA, held); err != nil || ip != held.IP {
		t.Fatalf("Attach with an address = %s, %v", ip, err)
	}
	b := Port{Peer: filepath.Join(nics, "b"), MAC: hw(macB)}
	_, ipB, err := s.Attach(segA, b)
	if err != nil || ipB != netip.MustParseAddr("10.200.0.3") {
		t.Fatalf("Attach without an address = %s, %v; want 10.200.0.3 (.1 is the gateway, .2 held)", ipB, err)
	}
	b.IP = ipB
	if _, again, err := s.Attach(segA, b); err != nil || again != ipB {
		t.Errorf("Attach again = %s, %v; want %s", again, err, ipB)
	}
	s.Detach(held.Peer)
	c := Port{Peer: filepath.Join(nics, "c"), MAC: hw(macC)}
	if _, ipC, err := s.Attach(segA, c); err != nil || ipC != held.IP {
		t.Errorf("Attach after a detach = %s, %v; want the freed %s", ipC, err, held.IP)
	}
}
