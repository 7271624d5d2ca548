package netswitch

import (
	"encoding/binary"
	"net/netip"
)

const (
	arpLen       = 28 // Ethernet/IPv4 ARP
	arpOpRequest = 1
	arpOpReply   = 2
)

type arpPacket struct {
	op                 uint16
	senderMAC          mac
	senderIP, targetIP netip.Addr
}

// parseARP reads an Ethernet/IPv4 ARP packet; any other hardware or protocol is not one.
func parseARP(b []byte) (arpPacket, bool) {
	var a arpPacket
	if len(b) < arpLen ||
		binary.BigEndian.Uint16(b[0:2]) != 1 || // Ethernet
		binary.BigEndian.Uint16(b[2:4]) != etherTypeIPv4 ||
		b[4] != 6 || b[5] != 4 {
		return a, false
	}
	a.op = binary.BigEndian.Uint16(b[6:8])
	copy(a.senderMAC[:], b[8:14])
	a.senderIP = netip.AddrFrom4([4]byte(b[14:18]))
	a.targetIP = netip.AddrFrom4([4]byte(b[24:28]))
	return a, true
}

// arpReplyBytes is the answer "ip is at hw" to a request from req's sender.
func arpReplyBytes(req arpPacket, hw mac, ip netip.Addr) []byte {
	b := make([]byte, arpLen)
	binary.BigEndian.PutUint16(b[0:2], 1)
	binary.BigEndian.PutUint16(b[2:4], etherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], arpOpReply)
	copy(b[8:14], hw[:])
	ip4 := ip.As4()
	copy(b[14:18], ip4[:])
	copy(b[18:24], req.senderMAC[:])
	target := req.senderIP.As4()
	copy(b[24:28], target[:])
	return b
}
