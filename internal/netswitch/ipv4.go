package netswitch

import (
	"encoding/binary"
	"net/netip"
)

const (
	ipv4HeaderLen = 20 // without options; the switch never sends options
	protoICMP     = 1
	protoUDP      = 17
	udpHeaderLen  = 8
	defaultTTL    = 64
)

// ipv4Packet is a parsed IPv4 packet; payload is bounded by the header's total length,
// so Ethernet padding after it is not taken for data.
type ipv4Packet struct {
	src, dst netip.Addr
	protocol uint8
	// fragment: part of a fragmented datagram; the switch answers none of those.
	fragment bool
	payload  []byte
}

func parseIPv4(b []byte) (ipv4Packet, bool) {
	var p ipv4Packet
	if len(b) < ipv4HeaderLen || b[0]>>4 != 4 {
		return p, false
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < ipv4HeaderLen || total < ihl || total > len(b) {
		return p, false
	}
	flagsFrag := binary.BigEndian.Uint16(b[6:8])
	p.fragment = flagsFrag&0x2000 != 0 || flagsFrag&0x1fff != 0 // MF set or an offset
	p.protocol = b[9]
	p.src = netip.AddrFrom4([4]byte(b[12:16]))
	p.dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.payload = b[ihl:total]
	return p, true
}

// ipv4Bytes returns an IPv4 packet (no options, TTL 64) around payload, header checksum set.
func ipv4Bytes(src, dst netip.Addr, protocol uint8, payload []byte) []byte {
	b := make([]byte, ipv4HeaderLen+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	b[8] = defaultTTL
	b[9] = protocol
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:12], checksum(b[:ipv4HeaderLen], 0))
	copy(b[ipv4HeaderLen:], payload)
	return b
}

// checksum is the Internet checksum (RFC 1071) of b, starting from the partial sum initial.
func checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

type udpDatagram struct {
	srcPort, dstPort uint16
	payload          []byte
}

func parseUDP(b []byte) (udpDatagram, bool) {
	var u udpDatagram
	if len(b) < udpHeaderLen {
		return u, false
	}
	length := int(binary.BigEndian.Uint16(b[4:6]))
	if length < udpHeaderLen || length > len(b) {
		return u, false
	}
	u.srcPort = binary.BigEndian.Uint16(b[0:2])
	u.dstPort = binary.BigEndian.Uint16(b[2:4])
	u.payload = b[udpHeaderLen:length]
	return u, true
}

// udpBytes returns a UDP datagram with its checksum computed over the IPv4 pseudo-header:
// clients that check it (dhclient does, through its packet filter) drop a wrong one.
func udpBytes(src, dst netip.Addr, srcPort, dstPort uint16, payload []byte) []byte {
	b := make([]byte, udpHeaderLen+len(payload))
	binary.BigEndian.PutUint16(b[0:2], srcPort)
	binary.BigEndian.PutUint16(b[2:4], dstPort)
	binary.BigEndian.PutUint16(b[4:6], uint16(len(b)))
	copy(b[udpHeaderLen:], payload)
	s, d := src.As4(), dst.As4()
	var pseudo uint32
	pseudo += uint32(s[0])<<8 | uint32(s[1])
	pseudo += uint32(s[2])<<8 | uint32(s[3])
	pseudo += uint32(d[0])<<8 | uint32(d[1])
	pseudo += uint32(d[2])<<8 | uint32(d[3])
	pseudo += protoUDP
	pseudo += uint32(len(b))
	sum := checksum(b, pseudo)
	if sum == 0 {
		sum = 0xffff // 0 would mean "no checksum" (RFC 768)
	}
	binary.BigEndian.PutUint16(b[6:8], sum)
	return b
}

const (
	icmpEchoReply   = 0
	icmpEchoRequest = 8
)

// icmpEchoReplyBytes turns an echo request's ICMP message into its reply: same
// identifier, sequence and data, type 0, checksum recomputed. ok is false for anything
// that is not an echo request.
func icmpEchoReplyBytes(req []byte) ([]byte, bool) {
	if len(req) < 8 || req[0] != icmpEchoRequest || req[1] != 0 {
		return nil, false
	}
	b := make([]byte, len(req))
	copy(b, req)
	b[0] = icmpEchoReply
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint16(b[2:4], checksum(b, 0))
	return b, true
}
