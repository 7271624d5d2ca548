package identity

import (
	"fmt"
	"net/netip"
)

// metadataAddresses are cloud instance metadata services outside link-local space: a
// remote control plane there would hand the manager's host credentials to the tenant's
// condition messages. (169.254.169.254 is link-local.)
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS, IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// AddressProblem says why a remote control plane may not be at addr ("" when it may):
// loopback (the manager's own apiserver and every local service), unspecified (which
// reaches loopback), link-local (169.254/16, fe80::/10: cloud metadata, the host's
// neighbours) or a cloud metadata address. allowLoopback lets loopback through (tests and
// single-host setups where the other anvil listens on 127.0.0.1).
func AddressProblem(addr netip.Addr, allowLoopback bool) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "not an IP address"
	case addr.IsLoopback():
		if allowLoopback {
			return ""
		}
		return "loopback"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return "link-local"
	}
	for _, m := range metadataAddresses {
		if addr == m {
			return "cloud metadata"
		}
	}
	return ""
}

// CheckAddresses refuses a host whose addresses include one AddressProblem refuses: every
// address a name resolves to must be acceptable, since the dialer may pick any.
func CheckAddresses(host string, addrs []netip.Addr, allowLoopback bool) error {
	if len(addrs) == 0 {
		return fmt.Errorf("the control plane host %s has no address", host)
	}
	for _, a := range addrs {
		if p := AddressProblem(a, allowLoopback); p != "" {
			return &AddressError{Host: host, Problem: p}
		}
	}
	return nil
}

// AddressError is a remote control plane refused for its address.
type AddressError struct {
	Host, Problem string
}

func (e *AddressError) Error() string {
	msg := fmt.Sprintf("the control plane host %s has an address an identity may not point at (%s)", e.Host, e.Problem)
	if e.Problem == "loopback" {
		msg += " (unless anvil capi-provider runs with --capi-identity-allow-loopback)"
	}
	return msg
}
