package netswitch

import (
	"fmt"
	"net/netip"
	"path/filepath"
)

// AllocateIP returns the lowest address of subnet that is not its network address, its
// broadcast address, gateway or in taken.
func AllocateIP(subnet netip.Prefix, gateway netip.Addr, taken []netip.Addr) (netip.Addr, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("subnet %s is not an IPv4 prefix of at most /30", subnet)
	}
	subnet = subnet.Masked()
	used := make(map[netip.Addr]bool, len(taken)+1)
	used[gateway] = true
	for _, a := range taken {
		used[a] = true
	}
	// At most len(used)+1 steps: every address skipped is in used.
	last := lastAddr(subnet)
	for a := subnet.Addr().Next(); a.IsValid() && a != last; a = a.Next() {
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("subnet %s has no free address", subnet)
}

// SocketPath is the socket of the segment named segment in dir: QEMU's remote.path.
func SocketPath(dir, segment string) string {
	return filepath.Join(dir, segment+".sock")
}
