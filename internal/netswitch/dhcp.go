package netswitch

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// DHCPv4 wire format (RFC 2131 section 2, options RFC 2132).

const (
	dhcpServerPort = 67
	dhcpClientPort = 68

	bootRequest = 1
	bootReply   = 2

	dhcpFixedLen  = 236 // op .. file, before the magic cookie
	dhcpOptionsAt = dhcpFixedLen + 4
	// dhcpMinLen: a BOOTP message is at least 300 octets (RFC 1542 section 2.1); some
	// clients drop shorter replies, so replies are padded to it.
	dhcpMinLen = 300

	flagBroadcast = 0x8000
)

var magicCookie = [4]byte{99, 130, 83, 99}

const (
	optPad           = 0
	optSubnetMask    = 1
	optRouter        = 3
	optDNS           = 6
	optBroadcastAddr = 28
	optRequestedIP   = 50
	optLeaseTime     = 51
	optMessageType   = 53
	optServerID      = 54
	optMessage       = 56
	optRenewalTime   = 58
	optRebindingTime = 59
	optEnd           = 255
)

// DHCP message types (option 53).
const (
	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpDecline  = 4
	dhcpAck      = 5
	dhcpNak      = 6
	dhcpRelease  = 7
	dhcpInform   = 8
)

type dhcpOption struct {
	code uint8
	data []byte
}

// dhcpMessage is one BOOTP/DHCP message. sname and file are not kept: the server never
// uses them, and option overload (option 52, options carried there) is not read.
type dhcpMessage struct {
	op, htype, hlen, hops          uint8
	xid                            uint32
	secs, flags                    uint16
	ciaddr, yiaddr, siaddr, giaddr netip.Addr
	chaddr                         [16]byte
	options                        []dhcpOption // in wire order; pads and the end not kept
}

var (
	errDHCPShort     = errors.New("shorter than a DHCP message")
	errDHCPCookie    = errors.New("no DHCP magic cookie")
	errDHCPTruncated = errors.New("an option runs past the end of the message")
)

// parseDHCP reads a DHCP message from a UDP payload. It never reads outside b, and what it
// returns holds no reference to b (the switch's read buffer is reused).
func parseDHCP(b []byte) (dhcpMessage, error) {
	var m dhcpMessage
	if len(b) < dhcpOptionsAt {
		return m, errDHCPShort
	}
	if [4]byte(b[dhcpFixedLen:dhcpOptionsAt]) != magicCookie {
		return m, errDHCPCookie
	}
	m.op, m.htype, m.hlen, m.hops = b[0], b[1], b[2], b[3]
	m.xid = binary.BigEndian.Uint32(b[4:8])
	m.secs = binary.BigEndian.Uint16(b[8:10])
	m.flags = binary.BigEndian.Uint16(b[10:12])
	m.ciaddr = netip.AddrFrom4([4]byte(b[12:16]))
	m.yiaddr = netip.AddrFrom4([4]byte(b[16:20]))
	m.siaddr = netip.AddrFrom4([4]byte(b[20:24]))
	m.giaddr = netip.AddrFrom4([4]byte(b[24:28]))
	copy(m.chaddr[:], b[28:44])
	for i := dhcpOptionsAt; i < len(b); {
		code := b[i]
		if code == optEnd {
			break
		}
		if code == optPad {
			i++
			continue
		}
		if i+1 >= len(b) {
			return m, errDHCPTruncated
		}
		n := int(b[i+1])
		if i+2+n > len(b) {
			return m, errDHCPTruncated
		}
		m.options = append(m.options, dhcpOption{code: code, data: append([]byte(nil), b[i+2:i+2+n]...)})
		i += 2 + n
	}
	return m, nil
}

// option returns the data of option code, the instances concatenated as RFC 3396 says
// a long option is split.
func (m *dhcpMessage) option(code uint8) ([]byte, bool) {
	var data []byte
	found := false
	for _, o := range m.options {
		if o.code == code {
			data = append(data, o.data...)
			found = true
		}
	}
	return data, found
}

// messageType is option 53, 0 when absent or malformed.
func (m *dhcpMessage) messageType() uint8 {
	if d, ok := m.option(optMessageType); ok && len(d) == 1 {
		return d[0]
	}
	return 0
}

// addrOption reads an option holding one IPv4 address; ok is false when it is absent or
// not four octets long.
func (m *dhcpMessage) addrOption(code uint8) (netip.Addr, bool) {
	if d, ok := m.option(code); ok && len(d) == 4 {
		return netip.AddrFrom4([4]byte(d)), true
	}
	return netip.Addr{}, false
}

// bytes encodes m: options in order (one longer than 255 octets split in several, RFC
// 3396), the end option, and zeros up to 300 octets.
func (m *dhcpMessage) bytes() []byte {
	b := make([]byte, dhcpOptionsAt, dhcpMinLen)
	b[0], b[1], b[2], b[3] = m.op, m.htype, m.hlen, m.hops
	binary.BigEndian.PutUint32(b[4:8], m.xid)
	binary.BigEndian.PutUint16(b[8:10], m.secs)
	binary.BigEndian.PutUint16(b[10:12], m.flags)
	for i, a := range []netip.Addr{m.ciaddr, m.yiaddr, m.siaddr, m.giaddr} {
		copy(b[12+4*i:16+4*i], addr4(a))
	}
	copy(b[28:44], m.chaddr[:])
	copy(b[dhcpFixedLen:dhcpOptionsAt], magicCookie[:])
	for _, o := range m.options {
		data := o.data
		for {
			n := min(len(data), 255)
			b = append(b, o.code, byte(n))
			b = append(b, data[:n]...)
			data = data[n:]
			if len(data) == 0 {
				break
			}
		}
	}
	b = append(b, optEnd)
	for len(b) < dhcpMinLen {
		b = append(b, optPad)
	}
	return b
}

// addr4 is a's four octets, zeros for the zero Addr or an IPv6 address.
func addr4(a netip.Addr) []byte {
	if !a.Is4() {
		return make([]byte, 4)
	}
	b := a.As4()
	return b[:]
}
