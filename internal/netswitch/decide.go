package netswitch

import (
	"net/netip"
)

// port is one attached NIC as the decisions see it.
type port struct {
	peer string // the NIC's socket path: the sender address of its frames
	mac  mac
	ip   netip.Addr
}

// table is one segment's configuration and ports. A published table is never changed
// (Attach and Detach publish a new one), so the segment's reader uses it without a lock.
type table struct {
	cfg    segmentConfig
	byPeer map[string]port
	byMAC  map[mac]string // every port's MAC: no unicast is ever flooded
	peers  []string       // sorted, so flooding has a stable order
}

// delivery is one frame to send to one port.
type delivery struct {
	to    string
	frame []byte
}

// dropReason says why a frame went nowhere; empty when it was delivered or answered.
type dropReason string

const (
	dropUnknownSender      dropReason = "sender is not a port of this segment"
	dropRunt               dropReason = "shorter than an Ethernet header"
	dropSourceMAC          dropReason = "source MAC is not the port's"
	dropUnknownDestination dropReason = "no port of the segment has the destination MAC"
	dropHairpin            dropReason = "destination MAC is the sender's own"
	dropNotIPv4            dropReason = "addressed to the gateway, which speaks only IPv4 and ARP"
	dropRouted             dropReason = "IPv4 to the gateway's MAC but not its address (it routes nothing), or malformed"
	dropARPToGateway       dropReason = "ARP to the gateway that is no reply to it"
	dropSourceIP           dropReason = "to the gateway from an address that is not the port's own"
	dropBadDHCP            dropReason = "malformed DHCP request"
)

// decision is what to do with one received frame.
type decision struct {
	deliveries []delivery
	// toStack is a frame for the gateway's TCP/IP stack (it may share the received
	// frame's memory, as deliveries do).
	toStack []byte
	drop    dropReason
	dhcp    string // what the DHCP server made of the frame, when it was DHCP
}

// decide is the switch: given the socket path a frame came from and the frame, the frames
// to send and to whom. Deliveries may share frame's memory, so they must be sent before
// the buffer is reused.
func (t *table) decide(from string, frame []byte) decision {
	p, ok := t.byPeer[from]
	if !ok {
		return decision{drop: dropUnknownSender}
	}
	h, payload, ok := parseEth(frame)
	if !ok {
		return decision{drop: dropRunt}
	}
	if h.src != p.mac {
		return decision{drop: dropSourceMAC}
	}
	if d, answered := t.answer(p, h, payload); answered {
		return d
	}
	if h.dst == gatewayMAC {
		if drop := t.forStack(p, h, payload); drop != "" {
			return decision{drop: drop}
		}
		return decision{toStack: frame}
	}
	return t.forward(from, h, frame)
}

// forStack says why a frame to the gateway's MAC that answer left is not for its stack:
// the stack gets IPv4 to the gateway's address (TCP) and ARP replies to its own requests,
// nothing else, and broadcasts never (it needs none). Checking the address here, not only
// in the stack, keeps "routes nothing" a property of the switch. What reaches the stack
// carries the sending port's own address (IPv4 source, ARP sender): the gateway routes
// nothing, so no pod address is due there, and a port may not pass itself off as another
// to the host's connections into the segment or to a service at the gateway.
func (t *table) forStack(p port, h ethHeader, payload []byte) dropReason {
	switch h.etherType {
	case etherTypeIPv4:
		ip, ok := parseIPv4(payload)
		if !ok || ip.dst != t.cfg.gateway {
			return dropRouted
		}
		if ip.src != p.ip {
			return dropSourceIP
		}
	case etherTypeARP:
		a, ok := parseARP(payload)
		if !ok || a.op != arpOpReply || a.targetIP != t.cfg.gateway {
			return dropARPToGateway
		}
		if a.senderIP != p.ip || a.senderMAC != p.mac {
			return dropSourceIP
		}
	default:
		return dropNotIPv4
	}
	return ""
}

// fromGateway switches a frame the gateway's stack sent as decide switches a port's, by
// its destination MAC alone: the stack is one more station of this segment, so what it
// sends reaches this segment's ports and nothing else.
func (t *table) fromGateway(frame []byte) decision {
	h, _, ok := parseEth(frame)
	if !ok {
		return decision{drop: dropRunt}
	}
	if h.src != gatewayMAC {
		return decision{drop: dropSourceMAC}
	}
	return t.forward("", h, frame)
}

// forward sends a frame of sender from ("" for the gateway, whose MAC no port has) to the
// port with its destination MAC, or for a group address to every port but the sender.
func (t *table) forward(from string, h ethHeader, frame []byte) decision {
	switch {
	case h.dst == gatewayMAC:
		return decision{drop: dropHairpin} // only the gateway's own frames get here
	case h.dst.isGroup():
		d := decision{deliveries: make([]delivery, 0, max(len(t.peers)-1, 0))}
		for _, peer := range t.peers {
			if peer != from {
				d.deliveries = append(d.deliveries, delivery{to: peer, frame: frame})
			}
		}
		return d
	}
	to, ok := t.byMAC[h.dst]
	switch {
	case !ok:
		return decision{drop: dropUnknownDestination}
	case to == from:
		return decision{drop: dropHairpin}
	}
	return decision{deliveries: []delivery{{to: to, frame: frame}}}
}

// answer handles what the gateway itself answers: ARP for its address, DHCP requests and
// ICMP echo to it. answered is false for any other frame, which is switched.
func (t *table) answer(p port, h ethHeader, payload []byte) (decision, bool) {
	toUs := h.dst == gatewayMAC || h.dst == broadcastMAC
	if !toUs {
		return decision{}, false
	}
	switch h.etherType {
	case etherTypeARP:
		a, ok := parseARP(payload)
		if !ok || a.op != arpOpRequest || a.targetIP != t.cfg.gateway {
			return decision{}, false
		}
		reply := arpReplyBytes(a, gatewayMAC, t.cfg.gateway)
		return t.reply(p, etherTypeARP, reply), true
	case etherTypeIPv4:
		ip, ok := parseIPv4(payload)
		if !ok || ip.fragment {
			return decision{}, false
		}
		if ip.protocol == protoUDP && (ip.dst == limitedBroadcast || ip.dst == t.cfg.gateway) {
			if u, ok := parseUDP(ip.payload); ok && u.dstPort == dhcpServerPort {
				return t.serveDHCP(p, u.payload), true
			}
		}
		if ip.protocol == protoICMP && ip.dst == t.cfg.gateway && h.dst == gatewayMAC {
			if echo, ok := icmpEchoReplyBytes(ip.payload); ok {
				return t.reply(p, etherTypeIPv4, ipv4Bytes(t.cfg.gateway, ip.src, protoICMP, echo)), true
			}
		}
	}
	return decision{}, false
}

// serveDHCP answers a DHCP request of port p. Every request to the server is consumed,
// answered or not: no other port sees a port's DHCP traffic.
func (t *table) serveDHCP(p port, udpPayload []byte) decision {
	req, err := parseDHCP(udpPayload)
	if err != nil {
		return decision{drop: dropBadDHCP, dhcp: err.Error()}
	}
	a := serveDHCP(t.cfg, p.ip, &req)
	if a.reply == nil {
		return decision{dhcp: a.note}
	}
	udp := udpBytes(t.cfg.gateway, a.to, dhcpServerPort, dhcpClientPort, a.reply.bytes())
	d := t.reply(p, etherTypeIPv4, ipv4Bytes(t.cfg.gateway, a.to, protoUDP, udp))
	d.dhcp = a.note
	return d
}

// reply is a frame from the gateway to port p alone, whatever the IP destination inside.
func (t *table) reply(p port, etherType uint16, payload []byte) decision {
	frame := ethFrame(ethHeader{dst: p.mac, src: gatewayMAC, etherType: etherType}, payload)
	return decision{deliveries: []delivery{{to: p.peer, frame: frame}}}
}
