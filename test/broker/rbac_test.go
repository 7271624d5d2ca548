package broker

import (
	"strings"
	"testing"
)

// The broker's kubeconfig in each site is its ServiceAccount's token alone: it reads its
// own namespace's Machines, and the API server answers 403 Forbidden for Secrets outside
// that namespace and for Hosts anywhere (the BMC credentials and the servers of the site).
func (f *fleet) brokerCredentialsAreNarrow(t *testing.T) {
	for _, c := range []struct {
		s *site
		b *brokerPool
	}{{f.s1, f.b1}, {f.s2, f.b2}} {
		if out, err := env.Kubectl(t, c.b.kubeconfig, "", "get", "machines", "-n", brokerNamespace, "-o", "name"); err != nil {
			t.Fatalf("the broker of %s cannot list its own Machines, so the refusals below would prove nothing: %v\n%s", c.s.name, err, out)
		}
		for _, args := range [][]string{
			{"get", "secrets", "-n", "default"},
			{"get", "secrets", "-n", "kube-system"},
			{"get", "secrets", "-n", "anvil-metal"},
			{"get", "secrets", "-A"},
			{"get", "hosts.metal.anvil.dev", "-A"},
			{"get", "hosts.metal.anvil.dev", "-n", "anvil-metal"},
			{"get", "hosts.metal.anvil.dev", "-n", brokerNamespace},
		} {
			out, err := env.Kubectl(t, c.b.kubeconfig, "", args...)
			if err == nil || !strings.Contains(out, "(Forbidden)") {
				t.Errorf("the broker of %s ran kubectl %v: %v\n%s\nwant 403 Forbidden", c.s.name, args, err, out)
			}
		}
	}
}
