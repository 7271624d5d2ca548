package netswitch

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

// Builders of the frames a guest sends, written from the RFCs independently of the
// switch's own encoders where a test checks those encoders.

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

func macOf(hw net.HardwareAddr) mac {
	m, _ := macFrom(hw)
	return m
}

func frameOf(dst, src mac, etherType uint16, payload []byte) []byte {
	return ethFrame(ethHeader{dst: dst, src: src, etherType: etherType}, payload)
}

func arpRequest(senderMAC mac, senderIP, targetIP netip.Addr) []byte {
	b := make([]byte, arpLen)
	binary.BigEndian.PutUint16(b[0:2], 1)
	binary.BigEndian.PutUint16(b[2:4], etherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], arpOpRequest)
	copy(b[8:14], senderMAC[:])
	s, d := senderIP.As4(), targetIP.As4()
	copy(b[14:18], s[:])
	copy(b[24:28], d[:])
	return frameOf(broadcastMAC, senderMAC, etherTypeARP, b)
}

func icmpEcho(src mac, srcIP, dstIP netip.Addr, id, seq uint16, data string) []byte {
	m := make([]byte, 8+len(data))
	m[0] = icmpEchoRequest
	binary.BigEndian.PutUint16(m[4:6], id)
	binary.BigEndian.PutUint16(m[6:8], seq)
	copy(m[8:], data)
	binary.BigEndian.PutUint16(m[2:4], checksum(m, 0))
	return frameOf(gatewayMAC, src, etherTypeIPv4, ipv4Bytes(srcIP, dstIP, protoICMP, m))
}

// dhcpClientFrame wraps a client's message as a client in INIT sends it: from 0.0.0.0:68
// to 255.255.255.255:67, Ethernet broadcast.
func dhcpClientFrame(src mac, m *dhcpMessage) []byte {
	zero, bcast := netip.IPv4Unspecified(), limitedBroadcast
	udp := udpBytes(zero, bcast, dhcpClientPort, dhcpServerPort, m.bytes())
	return frameOf(broadcastMAC, src, etherTypeIPv4, ipv4Bytes(zero, bcast, protoUDP, udp))
}

func dhcpClientMessage(hw mac, typ uint8, options ...dhcpOption) *dhcpMessage {
	zero := netip.IPv4Unspecified()
	m := &dhcpMessage{op: bootRequest, htype: 1, hlen: 6, xid: 0x3903f326,
		ciaddr: zero, yiaddr: zero, siaddr: zero, giaddr: zero,
		options: append([]dhcpOption{{optMessageType, []byte{typ}}}, options...)}
	copy(m.chaddr[:], hw[:])
	return m
}

// parsedReply is a frame the gateway sent, taken apart and its checksums verified.
type parsedReply struct {
	eth  ethHeader
	ip   ipv4Packet
	udp  udpDatagram
	dhcp dhcpMessage
}

// sum16 is a plain one's-complement sum, written apart from checksum() so the tests do
// not check the encoder with itself.
func sum16(b []byte, initial uint32) uint16 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func parseDHCPReply(t *testing.T, frame []byte) parsedReply {
	t.Helper()
	var r parsedReply
	var ok bool
	var payload []byte
	if r.eth, payload, ok = parseEth(frame); !ok || r.eth.etherType != etherTypeIPv4 {
		t.Fatalf("reply is not an IPv4 frame: % x", frame)
	}
	if r.ip, ok = parseIPv4(payload); !ok || r.ip.protocol != protoUDP {
		t.Fatalf("reply is not IPv4 UDP: % x", payload)
	}
	if got := sum16(payload[:ipv4HeaderLen], 0); got != 0xffff {
		t.Fatalf("IPv4 header checksum is wrong (sum %#04x)", got)
	}
	seg := r.ip.payload
	if binary.BigEndian.Uint16(seg[6:8]) == 0 {
		t.Fatalf("UDP checksum not computed")
	}
	s, d := r.ip.src.As4(), r.ip.dst.As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, protoUDP, byte(len(seg)>>8), byte(len(seg)))
	if got := sum16(seg, uint32(sum16(pseudo, 0))); got != 0xffff {
		t.Fatalf("UDP checksum is wrong (sum %#04x)", got)
	}
	if r.udp, ok = parseUDP(seg); !ok || r.udp.srcPort != dhcpServerPort || r.udp.dstPort != dhcpClientPort {
		t.Fatalf("reply is not UDP 67 -> 68: %+v", r.udp)
	}
	var err error
	if r.dhcp, err = parseDHCP(r.udp.payload); err != nil {
		t.Fatalf("reply's DHCP message: %v", err)
	}
	if len(r.udp.payload) < dhcpMinLen {
		t.Errorf("DHCP reply is %d octets, less than BOOTP's 300", len(r.udp.payload))
	}
	return r
}
