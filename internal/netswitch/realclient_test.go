package netswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
			tap := openTAP(t, ns, "tap0")
			inNS(t, ns, "ip", "link", "set", "tap0", "address", macA.String(), "up")

			s, _ := newSwitch(t)
			dir := t.TempDir()
			seg := segA
			seg.DNS = []netip.Addr{netip.MustParseAddr("10.200.0.53")}
			relay := bindNIC(t, dir, "relay", macA, ipA)
			path, _, err := s.Attach(seg, Port{Peer: relay.path, MAC: net.HardwareAddr(macA[:]), IP: ipA})
			if err != nil {
				t.Fatal(err)
			}
			relayFrames(t, tap, relay.conn, path)

			got := c.run(t, ns, dir)
			want := map[string]string{"ip": "10.200.0.10", "mask": "255.255.255.0", "router": "10.200.0.1",
				"dns": "10.200.0.53", "lease": "86400", "server": "10.200.0.1"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %q, want %q (all: %v)", c.name, k, got[k], v, got)
				}
			}
			// The kernel resolves the gateway by ARP and accepts its echo replies.
			inNS(t, ns, "ip", "addr", "add", "10.200.0.10/24", "dev", "tap0")
			inNS(t, ns, "busybox", "ping", "-c", "2", "-W", "5", "10.200.0.1")
		})
	}
}

// runUdhcpc gets one lease in the foreground and reports it through a script.
func runUdhcpc(t *testing.T, ns, dir string) map[string]string {
	out := filepath.Join(dir, "lease")
	script := writeScript(t, dir, `[ "$1" = bound ] && echo "ip=$ip mask=$subnet router=$router dns=$dns lease=$lease server=$serverid" > `+out)
	inNS(t, ns, "busybox", "udhcpc", "-i", "tap0", "-f", "-q", "-n", "-t", "5", "-T", "2", "-s", script)
	return readLease(t, out)
}

// runDhclient gets one lease (-1: try once), reports it through a script, and is
// stopped; it forks into the background once bound.
func runDhclient(t *testing.T, ns, dir string) map[string]string {
	out, pid := filepath.Join(dir, "lease"), filepath.Join(dir, "dhclient.pid")
	script := writeScript(t, dir, `[ "$reason" = BOUND ] && echo "ip=$new_ip_address mask=$new_subnet_mask router=$new_routers dns=$new_domain_name_servers lease=$new_dhcp_lease_time server=$new_dhcp_server_identifier" > `+out)
	t.Cleanup(func() { exec.Command("ip", "netns", "exec", ns, "dhclient", "-x", "-pf", pid).Run() })
	inNS(t, ns, "dhclient", "-1", "-v", "-sf", script, "-lf", filepath.Join(dir, "leases"), "-pf", pid, "tap0")
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
	inNS(t, ns, "sh", script)
	inNS(t, ns, "ip", "addr", "flush", "dev", "tap0") // networkd configured it; the ping step adds it again
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

func inNS(t *testing.T, ns string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("%s:\n%s", strings.Join(args, " "), out)
}

// openTAP creates a TAP device in namespace ns: the device is made in the namespace of the
// thread that creates it, so this thread enters ns for the call and comes back.
func openTAP(t *testing.T, ns, name string) *os.File {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	fd, tapErr := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if tapErr == nil {
		var ifr *unix.Ifreq
		if ifr, tapErr = unix.NewIfreq(name); tapErr == nil {
			ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
			tapErr = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		}
	}
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with its goroutine rather than run others
		// in the wrong namespace.
		t.Fatal(err)
	}
	runtime.UnlockOSThread()
	if tapErr != nil {
		t.Fatalf("cannot create a TAP device: %v", tapErr)
	}
	f := os.NewFile(uintptr(fd), "tap")
	return f
}

// relayFrames plays QEMU: frames from the TAP go to the segment, frames from the switch to
// the TAP.
func relayFrames(t *testing.T, tap *os.File, conn *net.UnixConn, segment string) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, maxFrame)
		for {
			n, err := tap.Read(buf)
			if err != nil {
				return
			}
			if _, err := conn.WriteToUnix(buf[:n], &net.UnixAddr{Name: segment, Net: "unixgram"}); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Logf("relay to the switch: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, maxFrame)
		for {
			conn.SetReadDeadline(time.Time{})
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			tap.Write(buf[:n])
		}
	}()
	t.Cleanup(func() { tap.Close(); conn.Close(); wg.Wait() })
}
