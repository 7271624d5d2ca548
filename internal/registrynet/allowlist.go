package registrynet

import "net/netip"

// Loopback allows every loopback address: for tests and tools whose registry is local.
var Loopback = []Allowed{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, {Prefix: netip.MustParsePrefix("::1/128")}}

// AllowRegistryUsage is the help of the --allow-registry flag of every command that reads
// registries tenants name.
const AllowRegistryUsage = "a registry on a loopback, link-local or private address that images may come from: HOST[:PORT] or a CIDR (repeatable); all others of those addresses are refused"

// ParseAllowList reads allow-list entries (see ParseAllowed).
func ParseAllowList(entries []string) ([]Allowed, error) {
	out := make([]Allowed, 0, len(entries))
	for _, e := range entries {
		a, err := ParseAllowed(e)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
