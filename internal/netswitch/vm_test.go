package netswitch

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/netswitch/netnstest"
)

// A test VM is a Linux network namespace whose TAP device's frames are relayed to a
// segment socket, as QEMU relays a guest's: the kernel's TCP is the guest's. Sockets the
// test makes inside the namespace (inNetNS) play the guest's programs.

// waitTCP bounds a TCP exchange or a dial that must finish.
const waitTCP = 30 * time.Second

type vm struct {
	t   *testing.T
	ns  string
	nic *nic // the relay's socket: the port's peer
}

// newVM makes the namespace with its TAP at m and ip (static: DHCP is tested elsewhere)
// and relays its frames to seg's socket in swDir; it does not attach it.
func newVM(t *testing.T, swDir string, seg Segment, name string, m mac, ip netip.Addr) *vm {
	t.Helper()
	ns := fmt.Sprintf("anvil-gw-%d-%s", os.Getpid(), name)
	netnstest.AddNamespace(t, ns)
	tap := netnstest.OpenTAP(t, ns, "tap0")
	netnstest.InNS(t, ns, "ip", "link", "set", "tap0", "address", m.String(), "up")
	netnstest.InNS(t, ns, "ip", "addr", "add", netip.PrefixFrom(ip, seg.Subnet.Bits()).String(), "dev", "tap0")
	relay := bindNIC(t, t.TempDir(), "relay", m, ip)
	netnstest.RelayFrames(t, tap, relay.conn, SocketPath(swDir, seg.Name))
	return &vm{t: t, ns: ns, nic: relay}
}

func (v *vm) attach(s *Switch, seg Segment) {
	v.t.Helper()
	if _, _, err := s.Attach(seg, Port{Peer: v.nic.path, MAC: net.HardwareAddr(v.nic.mac[:]), IP: v.nic.ip}); err != nil {
		v.t.Fatal(err)
	}
}

// listen is a TCP listener of the guest's, at any of its addresses.
func (v *vm) listen(port uint16) net.Listener {
	v.t.Helper()
	var l net.Listener
	err := netnstest.In(v.ns, func() (err error) {
		l, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { l.Close() })
	return l
}

// dial connects from the guest.
func (v *vm) dial(addr string) (net.Conn, error) {
	var c net.Conn
	err := netnstest.In(v.ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, waitTCP)
		return err
	})
	return c, err
}

// accept returns the listener's next connection, failing the test when none comes.
func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return r.c
	case <-time.After(waitTCP):
		l.Close() // ends the Accept
		t.Fatal("no connection came")
		return nil
	}
}

// roundTrip sends n random bytes each way and checks they arrive whole and unchanged.
func roundTrip(t *testing.T, a, b net.Conn, n int) {
	t.Helper()
	oneWay(t, a, b, n)
	oneWay(t, b, a, n)
}

func oneWay(t *testing.T, from, to net.Conn, n int) {
	t.Helper()
	want := make([]byte, n)
	rand.Read(want)
	deadline := time.Now().Add(waitTCP)
	from.SetDeadline(deadline)
	to.SetDeadline(deadline)
	defer from.SetDeadline(time.Time{})
	defer to.SetDeadline(time.Time{})
	written := make(chan error, 1)
	go func() {
		_, err := from.Write(want)
		written <- err
	}()
	got := make([]byte, n)
	_, rerr := io.ReadFull(to, got)
	if err := <-written; err != nil {
		t.Fatalf("writing %s→%s: %v", from.LocalAddr(), from.RemoteAddr(), err)
	}
	if rerr != nil {
		t.Fatalf("reading %s←%s: %v", to.LocalAddr(), to.RemoteAddr(), rerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%d bytes %s→%s arrived changed", n, from.LocalAddr(), from.RemoteAddr())
	}
}

// say writes one line on c.
func say(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(waitTCP))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		t.Fatal(err)
	}
}

// hear reads one line from c.
func hear(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitTCP))
	var b []byte
	one := make([]byte, 1)
	for {
		if _, err := c.Read(one); err != nil {
			t.Fatalf("reading from %s: %v (after %q)", c.RemoteAddr(), err, b)
		}
		if one[0] == '\n' {
			return string(b)
		}
		b = append(b, one[0])
	}
}
