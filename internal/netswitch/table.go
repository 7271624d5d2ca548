package netswitch

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// maxSocketPath: a unix socket path must fit sun_path, 108 bytes with its NUL.
const maxSocketPath = 107

// Segment is one network of VMs: its ports reach each other and nothing else.
type Segment struct {
	// Name is the segment's id, a file-name-safe string the caller derives (e.g. a hash of
	// namespace and network); the socket is dir/Name+".sock".
	Name string
	// Subnet is the segment's IPv4 network, e.g. 10.200.0.0/24 (at most /30).
	Subnet netip.Prefix
	// Gateway is inside Subnet: the switch answers ARP and ICMP echo for it, DHCP hands it
	// out as the router and server identifier, and its TCP is the segment's stack's
	// (DialTCP, ListenTCP); other traffic to it is dropped.
	Gateway netip.Addr
	// DNS is optional: DHCP option 6.
	DNS []netip.Addr
}

// Port is one NIC on a segment.
type Port struct {
	// Peer is the NIC's own socket path, exactly as given to QEMU as local.path: the
	// switch knows a frame's port by the address it was sent from.
	Peer string
	// MAC is the NIC's address; frames from Peer with another source MAC are dropped.
	MAC net.HardwareAddr
	// IP is the address DHCP gives the port: inside the subnet, not its network or
	// broadcast address, not the gateway.
	IP netip.Addr
}

// segmentConfigOf checks seg and returns its configuration.
func segmentConfigOf(seg Segment) (segmentConfig, error) {
	if err := checkSegmentName(seg.Name); err != nil {
		return segmentConfig{}, err
	}
	if !seg.Subnet.IsValid() || !seg.Subnet.Addr().Is4() || seg.Subnet.Bits() > 30 {
		return segmentConfig{}, fmt.Errorf("segment %s: subnet %s is not an IPv4 prefix of at most /30", seg.Name, seg.Subnet)
	}
	subnet := seg.Subnet.Masked()
	if err := checkHostAddr(subnet, seg.Gateway); err != nil {
		return segmentConfig{}, fmt.Errorf("segment %s: gateway: %w", seg.Name, err)
	}
	for _, a := range seg.DNS {
		if !a.Is4() {
			return segmentConfig{}, fmt.Errorf("segment %s: DNS server %s is not an IPv4 address", seg.Name, a)
		}
	}
	return segmentConfig{subnet: subnet, gateway: seg.Gateway, dns: slices.Clone(seg.DNS)}, nil
}

// checkSegmentName keeps a name to one plain file name in dir.
func checkSegmentName(name string) error {
	if name == "" {
		return fmt.Errorf("segment name is empty")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return fmt.Errorf("segment name %q has %q: only letters, digits, '.', '_' and '-' are allowed", name, r)
		}
	}
	return nil
}

// checkHostAddr: a is an IPv4 address of subnet that a host may have.
func checkHostAddr(subnet netip.Prefix, a netip.Addr) error {
	switch {
	case !a.Is4() || !subnet.Contains(a):
		return fmt.Errorf("%s is not an address of %s", a, subnet)
	case a == subnet.Addr():
		return fmt.Errorf("%s is the network address of %s", a, subnet)
	case a == lastAddr(subnet):
		return fmt.Errorf("%s is the broadcast address of %s", a, subnet)
	}
	return nil
}

// portOf checks p against the segment's configuration.
func portOf(cfg segmentConfig, p Port) (port, error) {
	if !filepath.IsAbs(p.Peer) || len(p.Peer) > maxSocketPath || strings.ContainsRune(p.Peer, 0) {
		return port{}, fmt.Errorf("port peer %q is not an absolute socket path of at most %d bytes", p.Peer, maxSocketPath)
	}
	m, ok := macFrom(p.MAC)
	switch {
	case !ok:
		return port{}, fmt.Errorf("port %s: MAC %q is not a 48-bit address", p.Peer, p.MAC)
	case m.isGroup():
		return port{}, fmt.Errorf("port %s: MAC %s is a multicast address", p.Peer, m)
	case m == gatewayMAC:
		return port{}, fmt.Errorf("port %s: MAC %s is the switch's own", p.Peer, m)
	}
	if err := checkHostAddr(cfg.subnet, p.IP); err != nil {
		return port{}, fmt.Errorf("port %s: %w", p.Peer, err)
	}
	if p.IP == cfg.gateway {
		return port{}, fmt.Errorf("port %s: %s is the gateway", p.Peer, p.IP)
	}
	return port{peer: p.Peer, mac: m, ip: p.IP}, nil
}

func newTable(cfg segmentConfig) *table {
	return &table{cfg: cfg, byPeer: map[string]port{}, byMAC: map[mac]string{}}
}

// with returns a copy of t with p added, or replacing the port of the same peer. Two ports
// may not share a MAC (unicast would be ambiguous) or an address (DHCP would give both).
func (t *table) with(p port) (*table, error) {
	for _, q := range t.byPeer {
		if q.peer == p.peer {
			continue
		}
		if q.mac == p.mac {
			return nil, fmt.Errorf("port %s: MAC %s is port %s's", p.peer, p.mac, q.peer)
		}
		if q.ip == p.ip {
			return nil, fmt.Errorf("port %s: address %s is port %s's", p.peer, p.ip, q.peer)
		}
	}
	n := t.without(p.peer)
	n.byPeer[p.peer] = p
	n.byMAC[p.mac] = p.peer
	n.peers = append(n.peers, p.peer)
	slices.Sort(n.peers)
	return n, nil
}

// without returns a copy of t without peer's port.
func (t *table) without(peer string) *table {
	n := newTable(t.cfg)
	for _, q := range t.byPeer {
		if q.peer != peer {
			n.byPeer[q.peer] = q
			n.byMAC[q.mac] = q.peer
			n.peers = append(n.peers, q.peer)
		}
	}
	slices.Sort(n.peers)
	return n
}

// addressesExcept are the addresses of t's ports but peer's: those a new address of
// peer's may not be.
func (t *table) addressesExcept(peer string) []netip.Addr {
	var out []netip.Addr
	for _, q := range t.byPeer {
		if q.peer != peer {
			out = append(out, q.ip)
		}
	}
	return out
}
