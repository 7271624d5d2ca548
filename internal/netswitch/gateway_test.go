package netswitch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func gatewayAt(port uint16) string { return netip.AddrPortFrom(testGateway, port).String() }

func dialCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTCP)
	t.Cleanup(cancel)
	return ctx
}

// The host reaches a guest's server from the gateway's address, and data flows both ways.
func TestGatewayDialsAVM(t *testing.T) {
	s, swDir := newSwitch(t)
	a := newVM(t, swDir, segA, "dial", macA, ipA)
	a.attach(s, segA)
	l := a.listen(8080)

	c, err := s.DialTCP(dialCtx(t), segA.Name, netip.AddrPortFrom(ipA, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	served := accept(t, l)
	if got := served.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != testGateway {
		t.Fatalf("the guest sees a connection from %s, want the gateway %s", got, testGateway)
	}
	roundTrip(t, c, served, 1<<20) // many segments each way: MSS, windows and checksums hold
}

// A guest reaches the host at the gateway's address and port, and data flows both ways;
// a closed listener refuses.
func TestVMsDialTheGateway(t *testing.T) {
	s, swDir := newSwitch(t)
	a := newVM(t, swDir, segA, "listen", macA, ipA)
	a.attach(s, segA)
	l, err := s.ListenTCP(segA.Name, 6443)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.dial(gatewayAt(6443))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := accept(t, l)
	if from := got.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); from != ipA {
		t.Fatalf("accepted a connection from %s, want %s", from, ipA)
	}
	roundTrip(t, c, got, 1<<20)

	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
	if _, err := a.dial(gatewayAt(6443)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing a closed listener: %v, want connection refused", err)
	}
}

// Two tenants with the same subnet, a guest at the same address on each: each segment's
// gateway reaches its own guest only, and a guest reaches its own gateway only.
func TestGatewaysKeepTenantsApart(t *testing.T) {
	s, swDir := newSwitch(t)
	a := newVM(t, swDir, segA, "iso-a", macA, ipA)
	x := newVM(t, swDir, segB, "iso-x", macX, ipA)
	a.attach(s, segA)
	x.attach(s, segB)

	// Servers at the same address and port on both: each gateway reaches its own.
	servers := map[string]net.Listener{segA.Name: a.listen(7000), segB.Name: x.listen(7000)}
	for _, seg := range []string{segA.Name, segB.Name} {
		c, err := s.DialTCP(dialCtx(t), seg, netip.AddrPortFrom(ipA, 7000))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		served := accept(t, servers[seg])
		say(t, c, "to "+seg)
		if got := hear(t, served); got != "to "+seg {
			t.Fatalf("%s's server heard %q", seg, got)
		}
	}

	// A server on x alone: a refuses tenant-a's gateway; x's server never hears of it,
	// as the first connection it accepts is tenant-b's, made after.
	only := x.listen(7001)
	_, err := s.DialTCP(dialCtx(t), segA.Name, netip.AddrPortFrom(ipA, 7001))
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("tenant-a's gateway to a port only tenant-b's guest serves: %v, want refused", err)
	}
	c, err := s.DialTCP(dialCtx(t), segB.Name, netip.AddrPortFrom(ipA, 7001))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	say(t, c, "via tenant-b")
	if got := hear(t, accept(t, only)); got != "via tenant-b" {
		t.Fatalf("x's server's first connection said %q", got)
	}

	// A listener at tenant-a's gateway: x's own gateway has none and refuses; the first
	// connection the listener accepts is a's, made after.
	l, err := s.ListenTCP(segA.Name, 6443)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := x.dial(gatewayAt(6443)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("x to its gateway's port 6443: %v, want connection refused", err)
	}
	ca, err := a.dial(gatewayAt(6443))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	say(t, ca, "from a")
	if got := hear(t, accept(t, l)); got != "from a" {
		t.Fatalf("tenant-a's listener's first connection said %q", got)
	}
}

// Detaching a segment's last port ends its gateway: listeners, connections both ways,
// and the stack's goroutines.
func TestDetachEndsTheGateway(t *testing.T) {
	s, swDir := newSwitch(t)
	a := newVM(t, swDir, segA, "close", macA, ipA)
	guest := a.listen(8080)
	before := runtime.NumGoroutine()

	a.attach(s, segA)
	l, err := s.ListenTCP(segA.Name, 6443)
	if err != nil {
		t.Fatal(err)
	}
	fromGuest, err := a.dial(gatewayAt(6443))
	if err != nil {
		t.Fatal(err)
	}
	defer fromGuest.Close()
	in := accept(t, l)
	out, err := s.DialTCP(dialCtx(t), segA.Name, netip.AddrPortFrom(ipA, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	served := accept(t, guest)
	roundTrip(t, fromGuest, in, 1024)
	roundTrip(t, out, served, 1024)
	accepting := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepting <- err
	}()

	s.Detach(a.nic.path)
	select {
	case err := <-accepting:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after the segment closed: %v, want net.ErrClosed", err)
		}
	case <-time.After(waitTCP):
		t.Fatal("Accept still waits after the segment closed")
	}
	for name, c := range map[string]net.Conn{"accepted": in, "dialed": out} {
		c.SetDeadline(time.Now().Add(waitTCP))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("reading the %s connection after the segment closed: %v, want it ended", name, err)
		}
		if _, err := c.Write([]byte("x")); err == nil {
			t.Errorf("writing the %s connection after the segment closed worked", name)
		}
	}
	if _, err := s.ListenTCP(segA.Name, 6444); err == nil {
		t.Error("ListenTCP on a closed segment worked")
	}
	if _, err := s.DialTCP(dialCtx(t), segA.Name, netip.AddrPortFrom(ipA, 8080)); err == nil {
		t.Error("DialTCP on a closed segment worked")
	}
	goroutinesBackTo(t, before)
}

// goroutinesBackTo waits until no more than n goroutines run: one that has done its work
// may still be on its way out.
func goroutinesBackTo(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling, as goleak does
	}
}

// What DialTCP and ListenTCP refuse, without a guest: a segment that is not open, an
// address that is not a guest's, a port already listened on.
func TestGatewayRefuses(t *testing.T) {
	s, _ := newSwitch(t)
	if _, err := s.ListenTCP(segA.Name, 6443); err == nil {
		t.Error("ListenTCP on a segment without ports worked")
	}
	if _, err := s.DialTCP(dialCtx(t), segA.Name, netip.AddrPortFrom(ipA, 80)); err == nil {
		t.Error("DialTCP on a segment without ports worked")
	}
	attachNIC(t, s, segA, t.TempDir(), "a", macA, ipA)
	for _, to := range []string{"8.8.8.8:80", "10.200.0.1:80", "10.200.0.0:80", "10.200.0.255:80", "10.200.0.10:0"} {
		if _, err := s.DialTCP(dialCtx(t), segA.Name, netip.MustParseAddrPort(to)); err == nil {
			t.Errorf("DialTCP to %s worked", to)
		}
	}
	l, err := s.ListenTCP(segA.Name, 6443)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := s.ListenTCP(segA.Name, 6443); err == nil {
		t.Error("a second listener at the same port")
	}
	if got := l.Addr().String(); got != gatewayAt(6443) {
		t.Errorf("listener's address %s, want %s", got, gatewayAt(6443))
	}
	free, err := s.ListenTCP(segA.Name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	if a := free.Addr().(*net.TCPAddr); a.Port == 0 || a.AddrPort().Addr() != testGateway {
		t.Errorf("a listener at port 0 is at %s, want a port of the gateway's chosen", a)
	}
}

// Closing the switch ends every segment's listeners and the stacks' goroutines.
func TestCloseEndsTheGateways(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(t.TempDir()+"/sw", testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	attachNIC(t, s, segA, dir, "a", macA, ipA)
	attachNIC(t, s, segB, dir, "x", macX, ipA)
	accepting := make(chan error, 2)
	for _, seg := range []string{segA.Name, segB.Name} {
		l, err := s.ListenTCP(seg, 6443) // the same port on each: two stacks
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := l.Accept()
			accepting <- err
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-accepting:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
			}
		case <-time.After(waitTCP):
			t.Fatal("Accept still waits after Close")
		}
	}
	goroutinesBackTo(t, before)
}
