package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// GuardChain is the iptables chain (filter table, both families) that drops Pod traffic
// bound off this machine.
const GuardChain = "ANVIL-EGRESS-GUARD"

// guardRules is the egress guard, one iptables-restore batch so it appears whole: traffic
// from the Pods (in through the CNI bridge, or from the Pod CIDR) and the host's own
// traffic still addressed to the service range after kube-proxy's DNAT (a service IP with
// no rule) is dropped unless it goes to the node address, the Pod CIDR or loopback, or
// answers this host on a connection the Pod did not open (the host dialling a Service:
// conntrack has already turned the answer's destination back into the host's address).
// The jumps go first in their chains, before kube-proxy's, whose KUBE-FORWARD accepts
// marked traffic.
func guardRules(o Options) (v4, v6 string) {
	v4 = fmt.Sprintf(`*filter
:%[1]s - [0:0]
-A %[1]s -m conntrack --ctdir REPLY -m addrtype --dst-type LOCAL -j RETURN
-A %[1]s -d %[2]s/32 -j RETURN
-A %[1]s -d %[3]s -j RETURN
-A %[1]s -d 127.0.0.0/8 -j RETURN
-A %[1]s -j DROP
-I FORWARD 1 -s %[3]s -j %[1]s
-I FORWARD 1 -i %[4]s -j %[1]s
-I INPUT 1 -i %[4]s -j %[1]s
-I OUTPUT 1 -d %[5]s -j %[1]s
COMMIT
`, GuardChain, o.NodeIP, o.PodCIDR, CNIBridge, ServiceCIDR)
	// Pods get no IPv6 address, but a link-local one could still be forwarded.
	v6 = fmt.Sprintf(`*filter
:%[1]s - [0:0]
-A %[1]s -j DROP
-I FORWARD 1 -i %[2]s -j %[1]s
COMMIT
`, GuardChain, CNIBridge)
	return v4, v6
}

func installGuard(o Options) error {
	v4, v6 := guardRules(o)
	if err := iptablesRestoreNoFlush("iptables", v4); err != nil {
		return fmt.Errorf("installing the egress guard: %w", err)
	}
	if err := iptablesRestoreNoFlush("ip6tables", v6); err != nil {
		return fmt.Errorf("installing the IPv6 egress guard: %w", err)
	}
	return nil
}

func iptablesRestoreNoFlush(family, rules string) error {
	cmd := exec.Command(family+"-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s", family, err, out)
	}
	return nil
}

var guardDrop = regexp.MustCompile(`(?m)^\[(\d+):\d+\] -A ` + GuardChain + ` -j DROP$`)

// GuardDrops is how many packets the IPv4 egress guard has dropped.
func GuardDrops() (uint64, error) {
	out, err := exec.Command("iptables-save", "-c", "-t", "filter").Output()
	if err != nil {
		return 0, fmt.Errorf("iptables-save: %w", err)
	}
	m := guardDrop.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no %s DROP rule in the filter table", GuardChain)
	}
	return strconv.ParseUint(string(m[1]), 10, 64)
}

// waitServiceRules waits until kube-proxy has written the kubernetes Service's rule with
// its endpoint (the apiserver at the node address): from then on a Pod's packet to the
// service IP is DNATed to this machine.
func waitServiceRules(ctx context.Context, o Options, proxy *controlplane.Process) error {
	endpoint := fmt.Sprintf("--to-destination %s:%d", o.NodeIP, o.APIServerPort)
	timeout := o.ReadyTimeout
	deadline := time.Now().Add(timeout)
	for {
		out, err := exec.Command("iptables-save", "-t", "nat").Output()
		if err == nil && strings.Contains(string(out), `"default/kubernetes:https cluster IP"`) && strings.Contains(string(out), endpoint) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-proxy wrote no rule for the kubernetes Service (to %s) within %s; its log is %s", endpoint, timeout, proxy.LogPath())
		}
		if err := proxy.Exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
