package netswitch

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

var (
	segA = Segment{Name: "tenant-a", Subnet: testSubnet, Gateway: testGateway}
	// segB is another namespace's network with the same addresses, as tenants may choose.
	segB = Segment{Name: "tenant-b", Subnet: testSubnet, Gateway: testGateway}
	macX = mac{0x52, 0x54, 0x00, 0, 1, 0x0a}
	macY = mac{0x52, 0x54, 0x00, 0, 1, 0x0b}
)

// twoTenants is a switch with ports a and b on tenant-a, x and y on tenant-b.
type twoTenants struct {
	s          *Switch
	a, b, x, y *nic
	nicDir     string
}

func newTwoTenants(t *testing.T) twoTenants {
	s, _ := newSwitch(t)
	dir := t.TempDir()
	return twoTenants{
		s: s, nicDir: dir,
		a: attachNIC(t, s, segA, dir, "a", macA, ipA),
		b: attachNIC(t, s, segA, dir, "b", macB, ipB),
		x: attachNIC(t, s, segB, dir, "x", macX, ipA), // same address as a, other tenant
		y: attachNIC(t, s, segB, dir, "y", macY, ipB),
	}
}

func payloadFrame(dst, src mac, text string) []byte {
	return frameOf(dst, src, 0x88b5, []byte(text)) // 0x88b5: local experimental EtherType
}

func TestPortsOfASegmentReachEachOther(t *testing.T) {
	n := newTwoTenants(t)
	unicast := payloadFrame(macB, macA, "a to b")
	n.a.send(unicast)
	if got := n.b.recv(); !bytes.Equal(got, unicast) {
		t.Fatalf("b got % x", got)
	}
	broadcast := payloadFrame(broadcastMAC, macB, "b to all")
	n.b.send(broadcast)
	if got := n.a.recv(); !bytes.Equal(got, broadcast) {
		t.Fatalf("a got % x", got)
	}
	// The other tenant hears none of it; its own broadcast reaches its own port only.
	n.x.send(payloadFrame(broadcastMAC, macX, "x to all"))
	if got := n.y.recv(); !bytes.Equal(got, payloadFrame(broadcastMAC, macX, "x to all")) {
		t.Fatalf("y got % x", got)
	}
	n.a.barrier(testGateway)
	n.b.barrier(testGateway)
	n.x.barrier(testGateway)
	for _, c := range []*nic{n.a, n.b, n.x, n.y} {
		c.expectNothing()
	}
}

// The attacker is x, a port of tenant-b, or a process that is no port at all. Each case
// sends one frame meant for a, then b (a port of a's segment) sends a marker to a: a's
// first frame must be the marker. A segment's frames are handled in order, so a frame
// that got through would arrive first.
func TestAnotherTenantCannotReachASegment(t *testing.T) {
	n := newTwoTenants(t)
	stranger := bindNIC(t, n.nicDir, "stranger", macStranger, ipC)
	unnamed, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.a.segment, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer unnamed.Close()
	tests := []struct {
		name   string
		attack func(frame []byte)
		frame  []byte
	}{
		{"a port of another segment, to this segment's socket",
			func(f []byte) { n.x.sendTo(n.a.segment, f) }, payloadFrame(macA, macX, "x to a")},
		{"a port of another segment with a port's source MAC",
			func(f []byte) { n.x.sendTo(n.a.segment, f) }, payloadFrame(macA, macB, "x as b to a")},
		{"a port of another segment, broadcast",
			func(f []byte) { n.x.sendTo(n.a.segment, f) }, payloadFrame(broadcastMAC, macB, "x as b to all")},
		{"a socket that is no port",
			func(f []byte) { stranger.sendTo(n.a.segment, f) }, payloadFrame(macA, macB, "stranger as b to a")},
		{"an unnamed socket",
			func(f []byte) {
				if _, err := unnamed.Write(f); err != nil {
					t.Fatal(err)
				}
			}, payloadFrame(broadcastMAC, macB, "unnamed as b to all")},
		{"a port of this segment with another port's source MAC",
			func(f []byte) { n.b.send(f) }, payloadFrame(macA, macX, "b as x to a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.attack(tt.frame)
			marker := payloadFrame(macA, macB, "marker: "+tt.name)
			n.b.send(marker)
			if got := n.a.recv(); !bytes.Equal(got, marker) {
				t.Fatalf("a received % x before the marker", got)
			}
		})
	}
}

// x forges a's MAC as the destination on its own segment: a's MAC is no port there.
func TestAForgedDestinationStaysInItsSegment(t *testing.T) {
	n := newTwoTenants(t)
	n.x.send(payloadFrame(macA, macX, "x to a's MAC"))
	n.x.send(payloadFrame(macB, macX, "x to b's MAC"))
	n.x.barrier(testGateway)
	n.a.expectNothing()
	n.b.expectNothing()
	n.y.expectNothing() // and no flooding of an unknown unicast either
}

func TestDHCPOverTheSocket(t *testing.T) {
	s, _ := newSwitch(t)
	dns := netip.MustParseAddr("10.200.0.53")
	seg := segA
	seg.DNS = []netip.Addr{dns}
	dir := t.TempDir()
	a := attachNIC(t, s, seg, dir, "a", macA, ipA)
	b := attachNIC(t, s, seg, dir, "b", macB, ipB)

	discover := dhcpClientMessage(macA, dhcpDiscover)
	discover.flags = flagBroadcast
	a.send(dhcpClientFrame(macA, discover))
	offer := parseDHCPReply(t, a.recv())
	if offer.dhcp.messageType() != dhcpOffer || offer.dhcp.yiaddr != ipA || offer.ip.dst != limitedBroadcast || offer.eth.dst != macA {
		t.Fatalf("offer %+v", offer)
	}
	request := dhcpClientMessage(macA, dhcpRequest,
		dhcpOption{optRequestedIP, addr4(offer.dhcp.yiaddr)}, dhcpOption{optServerID, addr4(testGateway)})
	a.send(dhcpClientFrame(macA, request))
	ack := parseDHCPReply(t, a.recv())
	router, _ := ack.dhcp.addrOption(optRouter)
	gotDNS, _ := ack.dhcp.addrOption(optDNS)
	if ack.dhcp.messageType() != dhcpAck || ack.dhcp.yiaddr != ipA || ack.ip.dst != ipA || router != testGateway || gotDNS != dns {
		t.Fatalf("ack %+v", ack)
	}
	// b asks for a's address: refused, and b is still offered its own.
	b.send(dhcpClientFrame(macB, dhcpClientMessage(macB, dhcpRequest, dhcpOption{optRequestedIP, addr4(ipA)})))
	if nak := parseDHCPReply(t, b.recv()); nak.dhcp.messageType() != dhcpNak {
		t.Fatalf("b's request for a's address: %+v", nak.dhcp)
	}
	b.send(dhcpClientFrame(macB, dhcpClientMessage(macB, dhcpDiscover, dhcpOption{optRequestedIP, addr4(ipA)})))
	if o := parseDHCPReply(t, b.recv()); o.dhcp.yiaddr != ipB {
		t.Fatalf("b was offered %s", o.dhcp.yiaddr)
	}
	// Neither saw the other's DHCP traffic.
	a.barrier(testGateway)
	b.barrier(testGateway)
	a.expectNothing()
	b.expectNothing()
}

func TestDetach(t *testing.T) {
	s, swDir := newSwitch(t)
	dir := t.TempDir()
	a := attachNIC(t, s, segA, dir, "a", macA, ipA)
	b := attachNIC(t, s, segA, dir, "b", macB, ipB)
	c := attachNIC(t, s, segA, dir, "c", macC, ipC)

	s.Detach(a.path)
	s.Detach(a.path)         // again: a no-op
	s.Detach("/nonexistent") // unknown: a no-op
	a.send(payloadFrame(macB, macA, "from a detached port"))
	marker := payloadFrame(macB, macC, "marker")
	c.send(marker)
	if got := b.recv(); !bytes.Equal(got, marker) {
		t.Fatalf("b received % x before the marker", got)
	}
	// Frames to a detached port's MAC are not delivered to it.
	b.send(payloadFrame(macA, macB, "to a detached port"))
	b.barrier(testGateway)
	a.expectNothing()

	s.Detach(b.path)
	if _, err := os.Stat(SocketPath(swDir, segA.Name)); err != nil {
		t.Fatalf("the segment's socket went with a port still attached: %v", err)
	}
	s.Detach(c.path)
	if _, err := os.Stat(SocketPath(swDir, segA.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket of a segment without ports is still there: %v", err)
	}
	// Attached again, the segment works again.
	a2 := attachNIC(t, s, segA, dir, "a2", macA, ipA)
	a2.barrier(testGateway)
}

func TestAPortWhoseVMStoppedDoesNotDisturbTheOthers(t *testing.T) {
	n := newTwoTenants(t)
	c := attachNIC(t, n.s, segA, n.nicDir, "c", macC, ipC)
	n.a.conn.Close()
	os.Remove(n.a.path) // QEMU gone: its socket file is removed (ENOENT)...
	n.b.conn.Close()    // ...or left behind (ECONNREFUSED)
	c.send(payloadFrame(broadcastMAC, macC, "to all"))
	c.send(payloadFrame(macA, macC, "to a"))
	c.send(payloadFrame(macB, macC, "to b"))
	c.barrier(testGateway)
}

func TestCloseRemovesTheSockets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	s, err := New(dir, testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("switch folder: %v %v", fi.Mode(), err)
	}
	nics := t.TempDir()
	a := attachNIC(t, s, segA, nics, "a", macA, ipA)
	attachNIC(t, s, segB, nics, "x", macX, ipA)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{segA.Name, segB.Name} {
		if _, err := os.Stat(SocketPath(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's socket is still there: %v", name, err)
		}
	}
	_, err = a.conn.WriteToUnix([]byte("x"), &net.UnixAddr{Name: a.segment, Net: "unixgram"})
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("sending to a closed segment: %v", err)
	}
	if _, _, err := s.Attach(segA, Port{Peer: a.path, MAC: net.HardwareAddr(macA[:]), IP: ipA}); err == nil {
		t.Errorf("Attach after Close worked")
	}
}

// leaveStaleSocket leaves what a crashed process leaves: a socket file nobody serves.
func leaveStaleSocket(t *testing.T, path string) {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // a datagram socket's file is not removed on close
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestNewAfterACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	leaveStaleSocket(t, SocketPath(dir, segA.Name))
	leaveStaleSocket(t, SocketPath(dir, "gone"))
	notASocket := filepath.Join(dir, "notes.sock")
	if err := os.WriteFile(notASocket, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := os.Stat(SocketPath(dir, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stale socket was left: %v", err)
	}
	if _, err := os.Stat(notASocket); err != nil {
		t.Errorf("a file that is not a socket was removed: %v", err)
	}
	// A stale file appearing after New (a crash of another run) is replaced at Attach.
	leaveStaleSocket(t, SocketPath(dir, segB.Name))
	nics := t.TempDir()
	a := attachNIC(t, s, segA, nics, "a", macA, ipA)
	x := attachNIC(t, s, segB, nics, "x", macX, ipA)
	a.barrier(testGateway)
	x.barrier(testGateway)
}

func TestAttachDoesNotTakeASocketInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	first, err := New(dir, testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	nics := t.TempDir()
	a := attachNIC(t, first, segA, nics, "a", macA, ipA)

	second, err := New(dir, testrLogger(t)) // must not remove the live socket either
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	if _, _, err := second.Attach(segA, Port{Peer: filepath.Join(nics, "b"), MAC: net.HardwareAddr(macB[:]), IP: ipB}); err == nil {
		t.Fatal("a second switch took a segment socket another one serves")
	}
	a.barrier(testGateway)
}

// A datagram larger than the read buffer is dropped, not forwarded cut short.
func TestAnOversizedDatagramIsDropped(t *testing.T) {
	n := newTwoTenants(t)
	n.a.send(payloadFrame(macB, macA, string(make([]byte, maxFrame))))
	marker := payloadFrame(macB, macA, "marker")
	n.a.send(marker)
	if got := n.b.recv(); !bytes.Equal(got, marker) {
		t.Fatalf("b received %d bytes before the marker", len(got))
	}
}

// Ports come and go while others talk: the reader works on published tables, never on
// one being changed (run with -race).
func TestAttachAndDetachWhileFramesFlow(t *testing.T) {
	n := newTwoTenants(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		peer := filepath.Join(n.nicDir, "c")
		for i := 0; i < 200; i++ {
			if _, _, err := n.s.Attach(segA, Port{Peer: peer, MAC: net.HardwareAddr(macC[:]), IP: ipC}); err != nil {
				t.Error(err)
				return
			}
			n.s.Detach(peer)
		}
	}()
	for i := 0; i < 200; i++ {
		frame := payloadFrame(macB, macA, "while ports change")
		n.a.send(frame)
		if got := n.b.recv(); !bytes.Equal(got, frame) {
			t.Fatalf("b got % x", got)
		}
	}
	<-done
}
