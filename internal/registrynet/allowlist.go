package registrynet

import "net/netip"

// Loopback allows every loopback address: for tests and tools whose registry is local.
var Loopback = []Allowed{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, {Prefix: netip.MustParsePrefix("::1/128")}}

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
