package netswitch

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	if os.Geteuid() != 0 {
		t.Fatal("needs root: a network namespace and a TAP device")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("needs ip (iproute2; make deps installs it)")
	}
	ns := fmt.Sprintf("anvil-gw-%d-%s", os.Getpid(), name)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("cannot make a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	tap := openTAP(t, ns, "tap0")
	inNS(t, ns, "ip", "link", "set", "tap0", "address", m.String(), "up")
	inNS(t, ns, "ip", "addr", "add", netip.PrefixFrom(ip, seg.Subnet.Bits()).String(), "dev", "tap0")
	relay := bindNIC(t, t.TempDir(), "relay", m, ip)
	relayFrames(t, tap, relay.conn, SocketPath(swDir, seg.Name))
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
	err := inNetNS(v.ns, func() (err error) {
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
	err := inNetNS(v.ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, waitTCP)
		return err
	})
	return c, err
}

// inNetNS runs f on a thread in namespace ns: a socket belongs to the namespace it was
// made in for good, so what f opens stays there after the thread comes back.
func inNetNS(ns string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with its goroutine rather than run others
		// in the wrong namespace.
		return fmt.Errorf("coming back from namespace %s: %w", ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
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
