package netswitch

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// The DHCP server's decisions (RFC 2131 sections 3, 4.1 and 4.3). A port's address is
// fixed by its owner at Attach: the server only ever offers that one, whoever asks and
// whatever chaddr says, so there is no pool, no lease table and nothing to persist.

// limitedBroadcast is 255.255.255.255, "this network" (RFC 919).
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

const (
	leaseTime     = 24 * time.Hour
	renewalTime   = leaseTime / 2     // T1, RFC 2131 section 4.4.5's default
	rebindingTime = leaseTime * 7 / 8 // T2, likewise
)

// segmentConfig is what a segment is, apart from its ports.
type segmentConfig struct {
	subnet  netip.Prefix // masked
	gateway netip.Addr
	dns     []netip.Addr
}

// dhcpAnswer is the server's decision on one request.
type dhcpAnswer struct {
	reply *dhcpMessage // nil: nothing is sent
	to    netip.Addr   // the reply's IP destination
	// note says what was answered, or why nothing was, for the log.
	note string
}

// serveDHCP answers req, received from the port whose address is ip.
func serveDHCP(cfg segmentConfig, ip netip.Addr, req *dhcpMessage) dhcpAnswer {
	if req.op != bootRequest || req.htype != 1 || req.hlen != 6 {
		return dhcpAnswer{note: "not an Ethernet BOOTREQUEST"}
	}
	if !req.giaddr.IsUnspecified() {
		return dhcpAnswer{note: "relayed request (no relay serves a segment)"}
	}
	switch req.messageType() {
	case dhcpDiscover:
		return cfg.lease(req, dhcpOffer, ip, "offer")
	case dhcpRequest:
		serverID, hasServerID := req.addrOption(optServerID)
		requested, hasRequested := req.addrOption(optRequestedIP)
		var want netip.Addr
		switch {
		case hasServerID && serverID != cfg.gateway:
			// SELECTING another server's offer: that server answers, not this one.
			return dhcpAnswer{note: "request for another server's offer"}
		case hasRequested: // SELECTING or INIT-REBOOT
			want = requested
		case !req.ciaddr.IsUnspecified(): // RENEWING or REBINDING
			want = req.ciaddr
		default:
			return cfg.nak(req, "request names no address")
		}
		if want != ip {
			return cfg.nak(req, "requested address is not this port's")
		}
		return cfg.lease(req, dhcpAck, ip, "ack")
	case dhcpInform:
		// The client has its address already and asks only for parameters: no lease
		// time, no yiaddr, answered to ciaddr (RFC 2131 section 4.3.5).
		reply := cfg.reply(req, dhcpAck)
		reply.ciaddr = req.ciaddr
		cfg.appendParameters(reply)
		return dhcpAnswer{reply: reply, to: req.ciaddr, note: "ack to inform"}
	case dhcpDecline:
		return dhcpAnswer{note: "declined: the client saw its address in use on the segment"}
	case dhcpRelease:
		return dhcpAnswer{note: "released"}
	default:
		return dhcpAnswer{note: "no or unknown message type"}
	}
}

// lease is an OFFER or ACK of ip.
func (cfg segmentConfig) lease(req *dhcpMessage, typ uint8, ip netip.Addr, note string) dhcpAnswer {
	reply := cfg.reply(req, typ)
	if typ == dhcpAck {
		reply.ciaddr = req.ciaddr
	}
	reply.yiaddr = ip
	reply.options = append(reply.options,
		dhcpOption{optLeaseTime, seconds(leaseTime)},
		dhcpOption{optRenewalTime, seconds(renewalTime)},
		dhcpOption{optRebindingTime, seconds(rebindingTime)},
	)
	cfg.appendParameters(reply)
	return dhcpAnswer{reply: reply, to: replyDestination(req, ip), note: note}
}

// nak refuses req. A NAK is broadcast at the IP layer (RFC 2131 section 4.1), since the
// client may hold no usable address; the frame still goes to the asking port alone.
func (cfg segmentConfig) nak(req *dhcpMessage, why string) dhcpAnswer {
	reply := cfg.reply(req, dhcpNak)
	reply.flags |= flagBroadcast
	reply.options = append(reply.options, dhcpOption{optMessage, []byte(why)})
	return dhcpAnswer{reply: reply, to: limitedBroadcast, note: "nak: " + why}
}

// reply is the skeleton every answer shares (RFC 2131 table 3): the client's xid, flags
// and chaddr, the message type and the server identifier.
func (cfg segmentConfig) reply(req *dhcpMessage, typ uint8) *dhcpMessage {
	zero := netip.IPv4Unspecified()
	return &dhcpMessage{
		op: bootReply, htype: 1, hlen: 6,
		xid: req.xid, flags: req.flags,
		ciaddr: zero, yiaddr: zero, siaddr: zero, giaddr: zero,
		chaddr: req.chaddr,
		options: []dhcpOption{
			{optMessageType, []byte{typ}},
			{optServerID, addr4(cfg.gateway)},
		},
	}
}

// appendParameters adds the segment's configuration: mask, router, broadcast, DNS.
func (cfg segmentConfig) appendParameters(m *dhcpMessage) {
	m.options = append(m.options,
		dhcpOption{optSubnetMask, prefixMask(cfg.subnet)},
		dhcpOption{optRouter, addr4(cfg.gateway)},
		dhcpOption{optBroadcastAddr, addr4(lastAddr(cfg.subnet))},
	)
	if len(cfg.dns) > 0 {
		var d []byte
		for _, a := range cfg.dns {
			d = append(d, addr4(a)...)
		}
		m.options = append(m.options, dhcpOption{optDNS, d})
	}
}

// replyDestination is where an OFFER or ACK goes at the IP layer (RFC 2131 section 4.1,
// giaddr zero): a client that has an address (ciaddr) gets it there; one that asked for
// broadcast (it cannot receive unicast before it is configured) gets 255.255.255.255;
// any other gets it at the address it is being given.
func replyDestination(req *dhcpMessage, yiaddr netip.Addr) netip.Addr {
	switch {
	case !req.ciaddr.IsUnspecified():
		return req.ciaddr
	case req.flags&flagBroadcast != 0:
		return limitedBroadcast
	default:
		return yiaddr
	}
}

func seconds(d time.Duration) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(d/time.Second))
}

func prefixMask(p netip.Prefix) []byte {
	m := uint32(0xffffffff) << (32 - p.Bits()) // a shift by 32 is 0 in Go
	return binary.BigEndian.AppendUint32(nil, m)
}

// lastAddr is the highest address of p: its broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(0xffffffff) >> p.Bits() // a shift by 32 is 0 in Go
	v := binary.BigEndian.Uint32(a[:]) | host
	return netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, v)))
}
