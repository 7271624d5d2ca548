package netswitch

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func hexBytes(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(parts, ""), " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func zeros(n int) string { return strings.Repeat("00", n) }

// dhclientDiscover is a DISCOVER frame as ISC dhclient (Debian's ifupdown) sends one, byte
// for byte per RFC 2131 and dhclient's layout: TOS 0x10, a host name, its parameter
// request list, the end option, zeros up to 300 octets, both checksums set.
func dhclientDiscover(t testing.TB) []byte {
	return hexBytes(t,
		"ffffffffffff 52540000000a 0800",                  // Ethernet: broadcast, from the NIC
		"4510 0148 0000 0000 8011 3996 00000000 ffffffff", // IPv4 0.0.0.0 -> 255.255.255.255
		"0044 0043 0134 6a5c",                             // UDP 68 -> 67
		"01 01 06 00 3903f326 0000 0000", zeros(16),       // op htype hlen hops xid secs flags, 4 addresses
		"52540000000a", zeros(10), zeros(64+128), // chaddr, sname, file
		"63825363",
		"350101",                          // DISCOVER
		"0c05 6775657374",                 // host name "guest"
		"370d 011c02030f06770c2c2f1a792a", // parameter request list
		"ff", zeros(34))
}

func TestDHCPParseDhclientDiscover(t *testing.T) {
	frame := dhclientDiscover(t)
	h, payload, _ := parseEth(frame)
	ip, ok := parseIPv4(payload)
	if !ok || h.src != macA || sum16(payload[:ipv4HeaderLen], 0) != 0xffff {
		t.Fatalf("the test frame itself is wrong: %+v %+v", h, ip)
	}
	u, _ := parseUDP(ip.payload)
	m, err := parseDHCP(u.payload)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := m.option(12)
	prl, _ := m.option(55)
	if m.op != bootRequest || m.xid != 0x3903f326 || m.messageType() != dhcpDiscover ||
		!bytes.Equal(m.chaddr[:6], macA[:]) || string(host) != "guest" || len(prl) != 13 || len(m.options) != 3 {
		t.Fatalf("parsed %+v", m)
	}

	d := testTable(t).decide("/run/a", frame)
	if len(d.deliveries) != 1 || d.deliveries[0].to != "/run/a" {
		t.Fatalf("deliveries %+v", d.deliveries)
	}
	r := parseDHCPReply(t, d.deliveries[0].frame)
	if r.eth.dst != macA || r.eth.src != gatewayMAC || r.ip.src != testGateway ||
		r.ip.dst != ipA || r.dhcp.xid != 0x3903f326 || r.dhcp.chaddr != m.chaddr {
		t.Fatalf("offer %+v", r)
	}
}

func TestDHCPRoundTrip(t *testing.T) {
	m := dhcpClientMessage(macB, dhcpRequest,
		dhcpOption{optRequestedIP, addr4(ipB)},
		dhcpOption{optServerID, addr4(testGateway)},
		dhcpOption{12, bytes.Repeat([]byte("h"), 255)},
	)
	m.flags = flagBroadcast
	m.secs = 3
	b := m.bytes()
	if len(b) < dhcpMinLen {
		t.Fatalf("encoded %d octets", len(b))
	}
	got, err := parseDHCP(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, *m)
	}
	// An option over 255 octets is split on the wire and read back whole (RFC 3396).
	long := bytes.Repeat([]byte{7}, 600)
	m.options = []dhcpOption{{optDNS, long}}
	got, err = parseDHCP(m.bytes())
	if d, _ := got.option(optDNS); err != nil || !bytes.Equal(d, long) || len(got.options) != 3 {
		t.Fatalf("long option: %v, %d instances", err, len(got.options))
	}
}

func TestDHCPParseRefuses(t *testing.T) {
	good := dhcpClientMessage(macA, dhcpDiscover).bytes()
	tests := map[string][]byte{
		"empty":                      nil,
		"no cookie":                  good[:dhcpFixedLen],
		"wrong cookie":               append(append(bytes.Clone(good[:dhcpFixedLen]), 1, 2, 3, 4), good[dhcpOptionsAt:]...),
		"option length past the end": append(bytes.Clone(good[:dhcpOptionsAt]), optMessageType, 5, 1),
		"option code without length": append(bytes.Clone(good[:dhcpOptionsAt]), optMessageType),
	}
	for name, b := range tests {
		if _, err := parseDHCP(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// No end option is accepted: the message ends where the datagram does.
	if m, err := parseDHCP(good[:dhcpOptionsAt+3]); err != nil || m.messageType() != dhcpDiscover {
		t.Errorf("without an end option: %v", err)
	}
}

func TestServeDHCP(t *testing.T) {
	cfg := testTable(t).cfg
	other := netip.MustParseAddr("10.200.0.77")
	zero := netip.IPv4Unspecified()
	withFlags := func(m *dhcpMessage, flags uint16) *dhcpMessage { m.flags = flags; return m }
	withCiaddr := func(m *dhcpMessage, a netip.Addr) *dhcpMessage { m.ciaddr = a; return m }
	req := func(opts ...dhcpOption) *dhcpMessage { return dhcpClientMessage(macA, dhcpRequest, opts...) }
	requested := func(a netip.Addr) dhcpOption { return dhcpOption{optRequestedIP, addr4(a)} }
	server := func(a netip.Addr) dhcpOption { return dhcpOption{optServerID, addr4(a)} }
	tests := []struct {
		name     string
		req      *dhcpMessage
		wantType uint8 // 0: no reply
		yiaddr   netip.Addr
		to       netip.Addr
	}{
		{"discover: offer of the port's address, unicast to it", dhcpClientMessage(macA, dhcpDiscover), dhcpOffer, ipA, ipA},
		{"discover asking for broadcast", withFlags(dhcpClientMessage(macA, dhcpDiscover), flagBroadcast), dhcpOffer, ipA, limitedBroadcast},
		{"discover with another chaddr still gets the port's address",
			func() *dhcpMessage { m := dhcpClientMessage(macA, dhcpDiscover); m.chaddr[5] = 0x99; return m }(), dhcpOffer, ipA, ipA},
		{"discover asking for another address", dhcpClientMessage(macA, dhcpDiscover, requested(other)), dhcpOffer, ipA, ipA},
		{"selecting this server's offer", req(server(testGateway), requested(ipA)), dhcpAck, ipA, ipA},
		{"selecting, broadcast", withFlags(req(server(testGateway), requested(ipA)), flagBroadcast), dhcpAck, ipA, limitedBroadcast},
		{"selecting another address", req(server(testGateway), requested(other)), dhcpNak, zero, limitedBroadcast},
		{"selecting another server's offer", req(server(other), requested(other)), 0, zero, zero},
		{"init-reboot with the port's address", req(requested(ipA)), dhcpAck, ipA, ipA},
		{"init-reboot with an old address", req(requested(other)), dhcpNak, zero, limitedBroadcast},
		{"renewing", withCiaddr(req(), ipA), dhcpAck, ipA, ipA},
		{"renewing another address", withCiaddr(req(), other), dhcpNak, zero, limitedBroadcast},
		{"request naming no address", req(), dhcpNak, zero, limitedBroadcast},
		{"inform", withCiaddr(dhcpClientMessage(macA, dhcpInform), ipA), dhcpAck, zero, ipA},
		{"decline", dhcpClientMessage(macA, dhcpDecline, requested(ipA)), 0, zero, zero},
		{"release", withCiaddr(dhcpClientMessage(macA, dhcpRelease), ipA), 0, zero, zero},
		{"no message type", &dhcpMessage{op: bootRequest, htype: 1, hlen: 6, ciaddr: zero, giaddr: zero}, 0, zero, zero},
		{"a reply, not a request", func() *dhcpMessage { m := dhcpClientMessage(macA, dhcpDiscover); m.op = bootReply; return m }(), 0, zero, zero},
		{"relayed", func() *dhcpMessage { m := dhcpClientMessage(macA, dhcpDiscover); m.giaddr = other; return m }(), 0, zero, zero},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := serveDHCP(cfg, ipA, tt.req)
			if tt.wantType == 0 {
				if a.reply != nil {
					t.Fatalf("replied %+v", a.reply)
				}
				return
			}
			if a.reply == nil {
				t.Fatalf("no reply (%s)", a.note)
			}
			r := a.reply
			if r.messageType() != tt.wantType || r.yiaddr != tt.yiaddr || a.to != tt.to {
				t.Fatalf("type %d yiaddr %s to %s, want %d %s %s", r.messageType(), r.yiaddr, a.to, tt.wantType, tt.yiaddr, tt.to)
			}
			if r.op != bootReply || r.xid != tt.req.xid || r.chaddr != tt.req.chaddr || !r.giaddr.IsUnspecified() {
				t.Fatalf("reply header %+v", r)
			}
			if id, _ := r.addrOption(optServerID); id != testGateway {
				t.Fatalf("server id %s", id)
			}
		})
	}
}

func TestServeDHCPOptions(t *testing.T) {
	cfg := testTable(t).cfg
	cfg.dns = []netip.Addr{netip.MustParseAddr("10.200.0.53"), netip.MustParseAddr("1.1.1.1")}
	a := serveDHCP(cfg, ipA, dhcpClientMessage(macA, dhcpDiscover))
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	want := map[uint8][]byte{
		optMessageType:   {dhcpOffer},
		optServerID:      {10, 200, 0, 1},
		optLeaseTime:     u32(86400),
		optRenewalTime:   u32(43200),
		optRebindingTime: u32(75600),
		optSubnetMask:    {255, 255, 255, 0},
		optRouter:        {10, 200, 0, 1},
		optBroadcastAddr: {10, 200, 0, 255},
		optDNS:           {10, 200, 0, 53, 1, 1, 1, 1},
	}
	got := map[uint8][]byte{}
	for _, o := range a.reply.options {
		got[o.code] = o.data
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("options\n got %v\nwant %v", got, want)
	}
	// Without DNS servers, no option 6; an INFORM's ACK has no lease times.
	cfg.dns = nil
	inform := dhcpClientMessage(macA, dhcpInform)
	inform.ciaddr = ipA
	a = serveDHCP(cfg, ipA, inform)
	for _, code := range []uint8{optDNS, optLeaseTime, optRenewalTime, optRebindingTime} {
		if _, ok := a.reply.option(code); ok {
			t.Errorf("inform's ack has option %d", code)
		}
	}
	if m, _ := a.reply.option(optSubnetMask); !bytes.Equal(m, []byte{255, 255, 255, 0}) {
		t.Errorf("inform's ack has mask %v", m)
	}
}

func TestChecksumKnownVector(t *testing.T) {
	// The IPv4 header of Wikipedia's "Internet checksum" example: checksum 0xb861.
	h := hexBytes(t, "4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7")
	if got := checksum(h, 0); got != 0xb861 {
		t.Fatalf("checksum %#04x, want 0xb861", got)
	}
}
