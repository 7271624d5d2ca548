package netswitch

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/netswitch/netnstest"
)

// TestRealDHCPClients runs real DHCP clients (busybox udhcpc, ISC dhclient) and the kernel's
// ARP and ping against the switch: each in a network namespace of its own on a TAP device,
// whose frames this test relays to the segment socket as QEMU's dgram netdev would. It
// needs root, iproute2 and the clients (make deps installs busybox and isc-dhcp-client);
// without them it fails, saying which.
func TestRealDHCPClients(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: a network namespace and a TAP device")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("needs ip (iproute2; make deps installs it)")
	}
	clients := []struct {
		name, binary string
		run          func(t *testing.T, ns, dir string) map[string]string
	}{
		{"udhcpc", "busybox", runUdhcpc},
		{"dhclient", "dhclient", runDhclient},
		{"systemd-networkd", "/lib/systemd/systemd-networkd", runNetworkd},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.binary); err != nil {
				t.Fatalf("%s is not installed (make deps installs it)", c.binary)
			}
			ns := fmt.Sprintf("anvil-netswitch-%d-%s", os.Getpid(), c.name)
			if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				t.Fatalf("cannot make a network namespace: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
			tap := netnstest.OpenTAP(t, ns, "tap0")
			netnstest.InNS(t, ns, "ip", "link", "set", "tap0", "address", macA.String(), "up")

			s, _ := newSwitch(t)
			dir := t.TempDir()
			seg := segA
			seg.DNS = []netip.Addr{netip.MustParseAddr("10.200.0.53")}
			relay := bindNIC(t, dir, "relay", macA, ipA)
			path, _, err := s.Attach(seg, Port{Peer: relay.path, MAC: net.HardwareAddr(macA[:]), IP: ipA})
			if err != nil {
				t.Fatal(err)
			}
			netnstest.RelayFrames(t, tap, relay.conn, path)

			got := c.run(t, ns, dir)
			want := map[string]string{"ip": "10.200.0.10", "mask": "255.255.255.0", "router": "10.200.0.1",
				"dns": "10.200.0.53", "lease": "86400", "server": "10.200.0.1"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %q, want %q (all: %v)", c.name, k, got[k], v, got)
				}
			}
			// The kernel resolves the gateway by ARP and accepts its echo replies.
			netnstest.InNS(t, ns, "ip", "addr", "add", "10.200.0.10/24", "dev", "tap0")
			netnstest.InNS(t, ns, "busybox", "ping", "-c", "2", "-W", "5", "10.200.0.1")
		})
	}
}

// runUdhcpc gets one lease in the foreground and reports it through a script.
func runUdhcpc(t *testing.T, ns, dir string) map[string]string {
	out := filepath.Join(dir, "lease")
	script := writeScript(t, dir, `[ "$1" = bound ] && echo "ip=$ip mask=$subnet router=$router dns=$dns lease=$lease server=$serverid" > `+out)
	netnstest.InNS(t, ns, "busybox", "udhcpc", "-i", "tap0", "-f", "-q", "-n", "-t", "5", "-T", "2", "-s", script)
	return readLease(t, out)
}

// runDhclient gets one lease (-1: try once), reports it through a script, and is
// stopped; it forks into the background once bound.
func runDhclient(t *testing.T, ns, dir string) map[string]string {
	out, pid := filepath.Join(dir, "lease"), filepath.Join(dir, "dhclient.pid")
	script := writeScript(t, dir, `[ "$reason" = BOUND ] && echo "ip=$new_ip_address mask=$new_subnet_mask router=$new_routers dns=$new_domain_name_servers lease=$new_dhcp_lease_time server=$new_dhcp_server_identifier" > `+out)
	t.Cleanup(func() { exec.Command("ip", "netns", "exec", ns, "dhclient", "-x", "-pf", pid).Run() })
	netnstest.InNS(t, ns, "dhclient", "-1", "-v", "-sf", script, "-lf", filepath.Join(dir, "leases"), "-pf", pid, "tap0")
	return readLease(t, out)
}

// runNetworkd runs systemd-networkd in the namespace with a /run/systemd of its own (one
// .network file for tap0), until it writes the lease.
// ip netns exec gives the command a mount namespace of its own: nothing reaches the host's.
func runNetworkd(t *testing.T, ns, dir string) map[string]string {
	out := filepath.Join(dir, "lease")
	script := writeScript(t, dir, `set -e
mount -t tmpfs tmpfs /run/systemd
mkdir /run/systemd/network /run/systemd/netif
chown systemd-network: /run/systemd/netif
# No udev here: networkd waits for udev unless /sys is read-only, as in a container.
mount -o remount,ro /sys
printf '[Match]\nName=tap0\n[Network]\nDHCP=ipv4\n' > /run/systemd/network/10-tap0.network
/lib/systemd/systemd-networkd & pid=$!
i=0
# networkd has no foreground "get one lease" mode: wait for its lease file, up to 30 s.
until [ -s /run/systemd/netif/leases/* ] 2>/dev/null || [ $i -ge 150 ]; do sleep 0.2; i=$((i+1)); done
kill $pid
. /run/systemd/netif/leases/*
echo "ip=$ADDRESS mask=$NETMASK router=$ROUTER dns=$DNS lease=$LIFETIME server=$SERVER_ADDRESS" > `+out)
	netnstest.InNS(t, ns, "sh", script)
	netnstest.InNS(t, ns, "ip", "addr", "flush", "dev", "tap0") // networkd configured it; the ping step adds it again
	return readLease(t, out)
}

func writeScript(t *testing.T, dir, line string) string {
	path := filepath.Join(dir, "script")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+line+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func readLease(t *testing.T, path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the client reported no lease: %v", err)
	}
	m := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}
