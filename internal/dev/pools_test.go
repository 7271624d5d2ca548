package dev

import (
	"net/netip"
	"testing"

	"github.com/anvil-dev/anvil/internal/registrynet"
)

// anvil dev's pools reach its own registry, by address or as localhost, and no other
// loopback port.
func TestPoolImagesAllowOnlyTheDevRegistry(t *testing.T) {
	allow := PoolImages("127.0.0.1:5001", nil).Network.Allow
	for _, tc := range []struct {
		host, ip string
		port     int
		ok       bool
	}{
		{"127.0.0.1", "127.0.0.1", 5001, true},
		{"localhost", "127.0.0.1", 5001, true},
		{"localhost", "::1", 5001, true},
		{"127.0.0.1", "127.0.0.1", 2379, false}, // etcd
		{"localhost", "127.0.0.1", 6443, false},
		{"10.0.0.1", "10.0.0.1", 5001, false},
	} {
		err := registrynet.Check(tc.host, netip.MustParseAddr(tc.ip), tc.port, allow)
		if (err == nil) != tc.ok {
			t.Errorf("%s (%s) port %d: %v, want allowed=%v", tc.host, tc.ip, tc.port, err, tc.ok)
		}
	}
}
