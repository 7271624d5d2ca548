package registrynet

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestKind(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"8.8.8.8", ""},
		{"2001:4860:4860::8888", ""},
		{"127.0.0.1", "loopback"},
		{"127.9.9.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"64:ff9b::7f00:1", "loopback"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "reserved"},
		{"100.64.0.1", "reserved"},
		{"239.1.2.3", "multicast"},
	} {
		if got := Kind(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("Kind(%s) = %q, want %q", tc.ip, got, tc.want)
		}
	}
}

func TestParseAllowed(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"10.0.0.0/8", "10.0.0.0/8", ""},
		{"10.1.2.3/8", "10.0.0.0/8", ""},
		{"127.0.0.1:5000", "127.0.0.1:5000", ""},
		{"127.0.0.1", "127.0.0.1", ""},
		{"[::1]:5000", "[::1]:5000", ""},
		{"Registry.Local:443", "registry.local:443", ""},
		{"registry.local", "registry.local", ""},
		{"registry.local:http", "", "port"},
		{"registry.local:0", "", "port"},
		{"", "", "HOST[:PORT]"},
		{"a b", "", "HOST[:PORT]"},
	} {
		a, err := ParseAllowed(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAllowed(%q) = %v, %v; want an error about %s", tc.in, a, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseAllowed(%q): %v", tc.in, err)
		case a.String() != tc.want:
			t.Errorf("ParseAllowed(%q) = %s, want %s", tc.in, a, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	allow := func(s ...string) []Allowed {
		var out []Allowed
		for _, e := range s {
			a, err := ParseAllowed(e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
		return out
	}
	for _, tc := range []struct {
		name, host, ip string
		port           int
		allow          []Allowed
		refused        string // part of the message; "" = allowed
	}{
		{"public", "registry.example", "203.0.113.9", 443, nil, ""},
		{"loopback literal", "127.0.0.1", "127.0.0.1", 5000, nil, "registry 127.0.0.1:5000 is a loopback address: refused unless the pool allows it (--allow-registry 127.0.0.1:5000)"},
		{"metadata service", "169.254.169.254", "169.254.169.254", 80, nil, "link-local"},
		{"name rebound to private", "evil.example", "10.0.0.7", 443, nil, "registry evil.example:443 resolves to 10.0.0.7, which is a private address"},
		{"allowed address and port", "127.0.0.1", "127.0.0.1", 5000, allow("127.0.0.1:5000"), ""},
		{"allowed address, other port", "127.0.0.1", "127.0.0.1", 5001, allow("127.0.0.1:5000"), "loopback"},
		{"allowed CIDR", "mirror.corp", "10.4.0.9", 443, allow("10.0.0.0/8"), ""},
		{"allowed name", "mirror.corp", "10.4.0.9", 443, allow("mirror.corp"), ""},
		{"allowed name, other name", "other.corp", "10.4.0.9", 443, allow("mirror.corp"), "private"},
		{"v4-mapped v6 against a v4 CIDR", "x", "::ffff:10.0.0.1", 443, allow("10.0.0.0/8"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.host, netip.MustParseAddr(tc.ip), tc.port, tc.allow)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.refused)
			}
		})
	}
}
