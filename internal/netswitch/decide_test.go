package netswitch

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
)

var (
	testSubnet  = netip.MustParsePrefix("10.200.0.0/24")
	testGateway = netip.MustParseAddr("10.200.0.1")
	macA        = mac{0x52, 0x54, 0x00, 0, 0, 0x0a}
	macB        = mac{0x52, 0x54, 0x00, 0, 0, 0x0b}
	macC        = mac{0x52, 0x54, 0x00, 0, 0, 0x0c}
	macStranger = mac{0x52, 0x54, 0x00, 0, 0, 0xee}
	ipA         = netip.MustParseAddr("10.200.0.10")
	ipB         = netip.MustParseAddr("10.200.0.11")
	ipC         = netip.MustParseAddr("10.200.0.12")
)

// testTable is a segment with ports a, b and c.
func testTable(t testing.TB) *table {
	t.Helper()
	tb := newTable(segmentConfig{subnet: testSubnet, gateway: testGateway,
		dns: []netip.Addr{netip.MustParseAddr("10.200.0.53")}})
	for _, p := range []port{{"/run/a", macA, ipA}, {"/run/b", macB, ipB}, {"/run/c", macC, ipC}} {
		var err error
		if tb, err = tb.with(p); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

func TestDecideSwitching(t *testing.T) {
	ipv4 := func(src, dst string) []byte { // a UDP datagram between any two addresses
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		return ipv4Bytes(s, d, protoUDP, udpBytes(s, d, 4000, 5000, []byte("hello")))
	}
	multicast := mac{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb}
	tests := []struct {
		name  string
		from  string
		frame []byte
		to    []string // the frame itself goes to these, unchanged
		drop  dropReason
	}{
		{"unicast to another port goes to it alone", "/run/a",
			frameOf(macB, macA, etherTypeIPv4, ipv4("10.200.0.10", "10.200.0.11")), []string{"/run/b"}, ""},
		{"broadcast goes to every other port", "/run/a",
			frameOf(broadcastMAC, macA, 0x88b5, []byte("x")), []string{"/run/b", "/run/c"}, ""},
		{"multicast goes to every other port", "/run/b",
			frameOf(multicast, macB, etherTypeIPv4, ipv4("10.200.0.11", "224.0.0.251")), []string{"/run/a", "/run/c"}, ""},
		{"source IP is not filtered (a node routing pod addresses)", "/run/a",
			frameOf(macC, macA, etherTypeIPv4, ipv4("192.168.7.3", "192.168.9.4")), []string{"/run/c"}, ""},
		{"ARP for another port's address is switched", "/run/a",
			arpRequest(macA, ipA, ipB), []string{"/run/b", "/run/c"}, ""},
		{"sender that is no port", "/run/stranger",
			frameOf(macB, macA, etherTypeIPv4, ipv4("10.200.0.10", "10.200.0.11")), nil, dropUnknownSender},
		{"unnamed sender", "",
			frameOf(broadcastMAC, macA, 0x88b5, []byte("x")), nil, dropUnknownSender},
		{"another port's source MAC", "/run/a",
			frameOf(macC, macB, etherTypeIPv4, ipv4("10.200.0.11", "10.200.0.12")), nil, dropSourceMAC},
		{"another port's source MAC, broadcast", "/run/a",
			frameOf(broadcastMAC, macB, 0x88b5, []byte("x")), nil, dropSourceMAC},
		{"a MAC no port has", "/run/a",
			frameOf(macA, macStranger, 0x88b5, []byte("x")), nil, dropSourceMAC},
		{"unicast to an unknown MAC is not flooded", "/run/a",
			frameOf(macStranger, macA, etherTypeIPv4, ipv4("10.200.0.10", "10.200.0.99")), nil, dropUnknownDestination},
		{"unicast to itself", "/run/a",
			frameOf(macA, macA, 0x88b5, []byte("x")), nil, dropHairpin},
		{"runt", "/run/a", []byte{1, 2, 3}, nil, dropRunt},
		{"empty", "/run/a", nil, nil, dropRunt},
	}
	tb := testTable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tb.decide(tt.from, tt.frame)
			if d.drop != tt.drop {
				t.Errorf("drop = %q, want %q", d.drop, tt.drop)
			}
			var to []string
			for _, out := range d.deliveries {
				to = append(to, out.to)
				if !bytes.Equal(out.frame, tt.frame) {
					t.Errorf("frame to %s was changed", out.to)
				}
			}
			if !slices.Equal(to, tt.to) {
				t.Errorf("delivered to %v, want %v", to, tt.to)
			}
		})
	}
}

// What is addressed to the gateway's MAC and not answered by the switch goes to the
// gateway's stack, if it is for the gateway's address; nothing is switched on.
func TestDecideToTheGatewaysStack(t *testing.T) {
	tcp := func(src, dst string) []byte { // protocol 6; the switch reads no further
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		return ipv4Bytes(s, d, 6, []byte("a TCP segment"))
	}
	arpReply := func(target netip.Addr) []byte {
		return frameOf(gatewayMAC, macA, etherTypeARP, arpReplyBytes(arpPacket{senderMAC: gatewayMAC, senderIP: target}, macA, ipA))
	}
	tests := []struct {
		name    string
		frame   []byte
		toStack bool
		drop    dropReason
	}{
		{"TCP to the gateway", frameOf(gatewayMAC, macA, etherTypeIPv4, tcp("10.200.0.10", "10.200.0.1")), true, ""},
		{"TCP from a routed address (the gateway routes nothing, so none is due)",
			frameOf(gatewayMAC, macA, etherTypeIPv4, tcp("192.168.7.3", "10.200.0.1")), false, dropSourceIP},
		{"TCP from another port's address", frameOf(gatewayMAC, macA, etherTypeIPv4, tcp("10.200.0.11", "10.200.0.1")), false, dropSourceIP},
		{"ARP reply claiming another port's address",
			frameOf(gatewayMAC, macA, etherTypeARP, arpReplyBytes(arpPacket{senderMAC: gatewayMAC, senderIP: testGateway}, macA, ipB)), false, dropSourceIP},
		{"ARP reply to the gateway's request", arpReply(testGateway), true, ""},
		{"ARP reply to another address", arpReply(ipB), false, dropARPToGateway},
		{"routed through the gateway", frameOf(gatewayMAC, macA, etherTypeIPv4, tcp("10.200.0.10", "8.8.8.8")), false, dropRouted},
		{"to another port's address through the gateway",
			frameOf(gatewayMAC, macA, etherTypeIPv4, tcp("10.200.0.10", "10.200.0.11")), false, dropRouted},
		{"malformed IPv4", frameOf(gatewayMAC, macA, etherTypeIPv4, []byte{0x45, 0}), false, dropRouted},
		{"IPv6", frameOf(gatewayMAC, macA, 0x86dd, make([]byte, 40)), false, dropNotIPv4},
		{"TCP broadcast is not the stack's", frameOf(broadcastMAC, macA, etherTypeIPv4, tcp("10.200.0.10", "10.200.0.1")), false, ""},
	}
	tb := testTable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tb.decide("/run/a", tt.frame)
			if d.drop != tt.drop || (d.toStack != nil) != tt.toStack {
				t.Fatalf("drop %q, to the stack %v; want %q, %v", d.drop, d.toStack != nil, tt.drop, tt.toStack)
			}
			if tt.toStack && (!bytes.Equal(d.toStack, tt.frame) || len(d.deliveries) != 0) {
				t.Fatalf("the stack got % x and ports %+v", d.toStack, d.deliveries)
			}
		})
	}
}

// The stack's frames are switched as a port's: by destination MAC, to ports only.
func TestFromGateway(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		to    []string
		drop  dropReason
	}{
		{"to a port", frameOf(macB, gatewayMAC, etherTypeIPv4, []byte("x")), []string{"/run/b"}, ""},
		{"ARP request, broadcast", arpRequest(gatewayMAC, testGateway, ipA), []string{"/run/a", "/run/b", "/run/c"}, ""},
		{"to an unknown MAC: not flooded", frameOf(macStranger, gatewayMAC, etherTypeIPv4, []byte("x")), nil, dropUnknownDestination},
		{"to itself", frameOf(gatewayMAC, gatewayMAC, etherTypeIPv4, []byte("x")), nil, dropHairpin},
		{"with a port's source MAC", frameOf(macB, macA, etherTypeIPv4, []byte("x")), nil, dropSourceMAC},
		{"runt", []byte{1, 2, 3}, nil, dropRunt},
	}
	tb := testTable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tb.fromGateway(tt.frame)
			var to []string
			for _, out := range d.deliveries {
				to = append(to, out.to)
				if !bytes.Equal(out.frame, tt.frame) {
					t.Errorf("frame to %s was changed", out.to)
				}
			}
			if d.drop != tt.drop || !slices.Equal(to, tt.to) || d.toStack != nil {
				t.Fatalf("drop %q, to %v; want %q, %v", d.drop, to, tt.drop, tt.to)
			}
		})
	}
}

func TestDecideARPForTheGateway(t *testing.T) {
	tb := testTable(t)
	for name, frame := range map[string][]byte{
		"broadcast request": arpRequest(macB, ipB, testGateway),
		// Linux confirms a neighbour with a unicast request to the MAC it has.
		"unicast request": func() []byte { f := arpRequest(macB, ipB, testGateway); copy(f[0:6], gatewayMAC[:]); return f }(),
		// The sender's IP is not checked, as with every frame.
		"from a routed address": arpRequest(macB, netip.MustParseAddr("192.168.1.2"), testGateway),
	} {
		t.Run(name, func(t *testing.T) {
			d := tb.decide("/run/b", frame)
			if len(d.deliveries) != 1 || d.deliveries[0].to != "/run/b" {
				t.Fatalf("deliveries %+v, want one to /run/b", d.deliveries)
			}
			h, payload, _ := parseEth(d.deliveries[0].frame)
			if h.dst != macB || h.src != gatewayMAC || h.etherType != etherTypeARP {
				t.Fatalf("reply header %+v", h)
			}
			a, ok := parseARP(payload)
			req, _ := parseARP(frame[ethHeaderLen:])
			if !ok || a.op != arpOpReply || a.senderMAC != gatewayMAC || a.senderIP != testGateway || a.targetIP != req.senderIP ||
				!bytes.Equal(payload[18:24], macB[:]) {
				t.Fatalf("reply %+v (% x)", a, payload)
			}
		})
	}
}

func TestDecideEchoToTheGateway(t *testing.T) {
	tb := testTable(t)
	d := tb.decide("/run/c", icmpEcho(macC, ipC, testGateway, 0x1234, 7, "ping data"))
	if len(d.deliveries) != 1 || d.deliveries[0].to != "/run/c" {
		t.Fatalf("deliveries %+v, want one to /run/c", d.deliveries)
	}
	h, payload, _ := parseEth(d.deliveries[0].frame)
	ip, ok := parseIPv4(payload)
	if h.dst != macC || h.src != gatewayMAC || !ok || ip.src != testGateway || ip.dst != ipC || ip.protocol != protoICMP {
		t.Fatalf("reply %+v %+v", h, ip)
	}
	if sum16(payload[:ipv4HeaderLen], 0) != 0xffff || sum16(ip.payload, 0) != 0xffff {
		t.Fatalf("a checksum is wrong: % x", payload)
	}
	want := []byte{icmpEchoReply, 0, 0, 0, 0x12, 0x34, 0, 7}
	want = append(want, "ping data"...)
	got := slices.Clone(ip.payload)
	got[2], got[3] = 0, 0
	if !bytes.Equal(got, want) {
		t.Fatalf("echo reply % x, want % x", got, want)
	}
	// An echo to another address through the gateway is not answered.
	if d := tb.decide("/run/c", icmpEcho(macC, ipC, netip.MustParseAddr("1.1.1.1"), 1, 1, "")); len(d.deliveries) != 0 {
		t.Fatalf("an echo to 1.1.1.1 was answered")
	}
}

func TestDecideDHCPGoesToTheServerOnly(t *testing.T) {
	tb := testTable(t)
	frame := dhcpClientFrame(macA, dhcpClientMessage(macA, dhcpDiscover))
	d := tb.decide("/run/a", frame)
	if len(d.deliveries) != 1 || d.deliveries[0].to != "/run/a" {
		t.Fatalf("deliveries %+v, want the offer to /run/a alone", d.deliveries)
	}
	r := parseDHCPReply(t, d.deliveries[0].frame)
	if r.eth.dst != macA || r.dhcp.messageType() != dhcpOffer || r.dhcp.yiaddr != ipA {
		t.Fatalf("reply %+v", r)
	}
	// A renewal is unicast to the gateway, at the MAC ARP gave for it.
	renew := dhcpClientMessage(macA, dhcpRequest)
	renew.ciaddr = ipA
	udp := udpBytes(ipA, testGateway, dhcpClientPort, dhcpServerPort, renew.bytes())
	d = tb.decide("/run/a", frameOf(gatewayMAC, macA, etherTypeIPv4, ipv4Bytes(ipA, testGateway, protoUDP, udp)))
	if len(d.deliveries) != 1 || d.deliveries[0].to != "/run/a" {
		t.Fatalf("renewal: deliveries %+v", d.deliveries)
	}
	if r := parseDHCPReply(t, d.deliveries[0].frame); r.dhcp.messageType() != dhcpAck || r.ip.dst != ipA {
		t.Fatalf("renewal answered %+v", r)
	}

	// A malformed request (an option longer than the message) is consumed too, not
	// flooded: whatever reaches the server stays there.
	msg := dhcpClientMessage(macA, dhcpDiscover).bytes()[:dhcpOptionsAt+3]
	msg[dhcpOptionsAt+1] = 200
	zero := netip.IPv4Unspecified()
	udp = udpBytes(zero, limitedBroadcast, dhcpClientPort, dhcpServerPort, msg)
	d = tb.decide("/run/a", frameOf(broadcastMAC, macA, etherTypeIPv4, ipv4Bytes(zero, limitedBroadcast, protoUDP, udp)))
	if len(d.deliveries) != 0 || d.drop != dropBadDHCP {
		t.Fatalf("a malformed DHCP request went to %+v", d.deliveries)
	}
}
