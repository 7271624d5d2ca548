package netswitch

import (
	"encoding/binary"
	"net"
)

// mac is a 48-bit Ethernet address, comparable so it can key maps.
type mac [6]byte

// gatewayMAC is the switch's own address, the gateway's on every segment: locally
// administered (bit 1 of the first octet) and unicast (bit 0 clear), so it never collides
// with a vendor's address. The octets after 02 spell "anvil".
var gatewayMAC = mac{0x02, 0x61, 0x6e, 0x76, 0x69, 0x6c}

var broadcastMAC = mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const (
	ethHeaderLen  = 14
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
)

func macFrom(hw net.HardwareAddr) (mac, bool) {
	var m mac
	if len(hw) != len(m) {
		return m, false
	}
	copy(m[:], hw)
	return m, true
}

// isGroup: broadcast and multicast addresses have the I/G bit (bit 0 of the first octet).
func (m mac) isGroup() bool { return m[0]&1 == 1 }

func (m mac) String() string { return net.HardwareAddr(m[:]).String() }

// ethHeader is the part of a frame the switch decides on.
type ethHeader struct {
	dst, src  mac
	etherType uint16
}

func parseEth(frame []byte) (ethHeader, []byte, bool) {
	var h ethHeader
	if len(frame) < ethHeaderLen {
		return h, nil, false
	}
	copy(h.dst[:], frame[0:6])
	copy(h.src[:], frame[6:12])
	h.etherType = binary.BigEndian.Uint16(frame[12:14])
	return h, frame[ethHeaderLen:], true
}

// ethFrame returns a new frame of header h around payload.
func ethFrame(h ethHeader, payload []byte) []byte {
	b := make([]byte, ethHeaderLen+len(payload))
	copy(b[0:6], h.dst[:])
	copy(b[6:12], h.src[:])
	binary.BigEndian.PutUint16(b[12:14], h.etherType)
	copy(b[ethHeaderLen:], payload)
	return b
}
