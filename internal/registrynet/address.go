package registrynet

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// nonPublic are ranges not covered by netip's predicates that still lead inside a site:
// "this network", shared address space (carrier NAT), and the IETF and benchmarking ranges.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052): checked as that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Kind names why an address is not public ("loopback", "private", ...), or "" when it is.
func Kind(ip netip.Addr) string {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return "reserved"
		}
	}
	return ""
}

// Allowed is one allow-list entry: a network (CIDR or single address) or a host name,
// with an optional port (0: any).
type Allowed struct {
	Prefix netip.Prefix
	Host   string
	Port   int
}

// ParseAllowed reads HOST[:PORT], IP[:PORT], [IPv6]:PORT or a CIDR.
func ParseAllowed(s string) (Allowed, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return Allowed{Prefix: p.Masked()}, nil
	}
	host, port := s, 0
	if h, ps, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return Allowed{}, fmt.Errorf("allowed registry %q: port %q is not a number from 1 to 65535", s, ps)
		}
		host, port = h, n
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.ContainsAny(host, "/ ") {
		return Allowed{}, fmt.Errorf("allowed registry %q: want HOST[:PORT] or a CIDR such as 10.0.0.0/8", s)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return Allowed{Prefix: netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()), Port: port}, nil
	}
	return Allowed{Host: strings.ToLower(host), Port: port}, nil
}

func (a Allowed) String() string {
	var s string
	switch {
	case a.Host != "":
		s = a.Host
	case a.Prefix.IsSingleIP():
		s = a.Prefix.Addr().String()
		if a.Port != 0 && a.Prefix.Addr().Is6() {
			s = "[" + s + "]"
		}
	default:
		return a.Prefix.String()
	}
	if a.Port != 0 {
		s += ":" + strconv.Itoa(a.Port)
	}
	return s
}

func (a Allowed) portMatches(port int) bool { return a.Port == 0 || a.Port == port }

// allowsName reports whether the entry names host (a registry the admin trusts by name,
// at whatever address it resolves to).
func (a Allowed) allowsName(host string, port int) bool {
	return a.Host != "" && a.Host == strings.ToLower(host) && a.portMatches(port)
}

func (a Allowed) allowsAddr(ip netip.Addr, port int) bool {
	return a.Prefix.IsValid() && a.Prefix.Contains(ip.Unmap()) && a.portMatches(port)
}

// Check says whether a connection to ip:port, reached through the name host, may be made:
// nil for a public address or one the list allows, else an error naming the address, why
// it is refused and the flag that would allow it.
func Check(host string, ip netip.Addr, port int, allow []Allowed) error {
	for _, a := range allow {
		if a.allowsName(host, port) || a.allowsAddr(ip, port) {
			return nil
		}
	}
	kind := Kind(ip)
	if kind == "" {
		return nil
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	via := ""
	if host != ip.Unmap().String() {
		via = fmt.Sprintf(" resolves to %s, which", ip)
	}
	return &RefusedError{Target: target, Address: ip, msg: fmt.Sprintf("registry %s%s is a %s address: refused unless the pool allows it (--allow-registry %s)",
		target, via, kind, target)}
}

// RefusedError is a registry address the policy refuses.
type RefusedError struct {
	Target  string
	Address netip.Addr
	msg     string
}

func (e *RefusedError) Error() string { return e.msg }

// Public is the refusal as the tenant who named the registry may read it: the registry as
// named, without the address a name resolved to or what kind of network that is (both
// describe the site's inside), and without the flag (the site's configuration).
func (e *RefusedError) Public() string {
	return fmt.Sprintf("registry %s is not on a public address: refused (an administrator may allow it)", e.Target)
}
