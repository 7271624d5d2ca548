package nocloud

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Interface is one NIC as a seed's network-config configures it: found by MAC, named, and
// addressed by DHCP.
type Interface struct {
	// Name is the NIC's name in the machine's spec; the guest's interface is called
	// InterfaceName(Name).
	Name string
	MAC  string
}

// NetworkConfig is a seed's network-config (cloud-init's version 2): every NIC by its MAC,
// renamed after its spec name and brought up with DHCP. Without it cloud-init configures
// only the first NIC it finds; with it a guest's interfaces have the names its owner gave
// them, whatever bus order the kernel saw. Values are quoted (Quote), so no name or MAC
// can add keys.
func NetworkConfig(nics []Interface) []byte {
	var b strings.Builder
	b.WriteString("version: 2\nethernets:\n")
	for _, n := range nics {
		fmt.Fprintf(&b, "  %s:\n    match:\n      macaddress: %s\n    set-name: %s\n    dhcp4: true\n",
			Quote(n.Name), Quote(strings.ToLower(n.MAC)), Quote(InterfaceName(n.Name)))
	}
	return []byte(b.String())
}

// maxInterfaceName is the longest interface name Linux takes (IFNAMSIZ less its NUL).
const maxInterfaceName = 15

// InterfaceName is the guest's name for the NIC called name: name itself when Linux takes
// it (a spec name is [a-z0-9-]), else its first 10 characters and 4 hex digits of its hash.
func InterfaceName(name string) string {
	if len(name) <= maxInterfaceName && name != "" {
		return name
	}
	h := sha256.Sum256([]byte(name))
	return name[:10] + "-" + hex.EncodeToString(h[:2])
}
