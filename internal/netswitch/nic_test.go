package netswitch

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
)

// A test NIC plays QEMU's dgram netdev: a unixgram socket bound at its own path, sending
// whole frames to the segment's socket.

// waitLong bounds a read that must succeed; waitShort is how long a NIC listens for a frame
// that must not come, once a barrier has shown the switch is done with what was sent.
const (
	waitLong  = 5 * time.Second
	waitShort = 100 * time.Millisecond
)

type nic struct {
	t       *testing.T
	conn    *net.UnixConn
	path    string
	segment string // the segment socket it sends to
	mac     mac
	ip      netip.Addr
	seq     uint16
}

func newSwitch(t *testing.T) (*Switch, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sw")
	s, err := New(dir, testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, dir
}

// bindNIC binds a socket at dir/name without attaching it.
func bindNIC(t *testing.T, dir, name string, m mac, ip netip.Addr) *nic {
	t.Helper()
	path := filepath.Join(dir, name)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); os.Remove(path) })
	return &nic{t: t, conn: conn, path: path, mac: m, ip: ip}
}

// attachNIC binds a NIC and attaches it to seg.
func attachNIC(t *testing.T, s *Switch, seg Segment, dir, name string, m mac, ip netip.Addr) *nic {
	t.Helper()
	n := bindNIC(t, dir, name, m, ip)
	path, _, err := s.Attach(seg, Port{Peer: n.path, MAC: net.HardwareAddr(m[:]), IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	n.segment = path
	return n
}

func (n *nic) send(frame []byte) { n.t.Helper(); n.sendTo(n.segment, frame) }

func (n *nic) sendTo(path string, frame []byte) {
	n.t.Helper()
	if _, err := n.conn.WriteToUnix(frame, &net.UnixAddr{Name: path, Net: "unixgram"}); err != nil {
		n.t.Fatal(err)
	}
}

// recv returns the next frame, failing the test when none comes.
func (n *nic) recv() []byte {
	n.t.Helper()
	b, err := n.read(waitLong)
	if err != nil {
		n.t.Fatalf("%s: no frame: %v", filepath.Base(n.path), err)
	}
	return b
}

func (n *nic) read(wait time.Duration) ([]byte, error) {
	buf := make([]byte, maxFrame)
	n.conn.SetReadDeadline(time.Now().Add(wait))
	k, _, err := n.conn.ReadFromUnix(buf)
	return buf[:k], err
}

// barrier pings the gateway and waits for the answer: the switch handles a segment's
// frames in order, so everything this NIC sent before has been handled, and what it made
// the switch send is already queued at its receivers.
func (n *nic) barrier(gateway netip.Addr) {
	n.t.Helper()
	n.seq++
	n.send(icmpEcho(n.mac, n.ip, gateway, 0xbeef, n.seq, "barrier"))
	for {
		b := n.recv()
		h, payload, _ := parseEth(b)
		ip, ok := parseIPv4(payload)
		if h.src == gatewayMAC && ok && ip.protocol == protoICMP && len(ip.payload) >= 8 && ip.payload[0] == icmpEchoReply {
			return
		}
		n.t.Fatalf("%s: unexpected frame while waiting for the echo reply: % x", filepath.Base(n.path), b)
	}
}

// expectNothing fails if a frame is queued (call it after a barrier).
func (n *nic) expectNothing() {
	n.t.Helper()
	b, err := n.read(waitShort)
	if err == nil {
		n.t.Fatalf("%s received a frame it must not: % x", filepath.Base(n.path), b)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		n.t.Fatal(err)
	}
}

func testrLogger(t *testing.T) logr.Logger {
	return testr.NewWithOptions(t, testr.Options{Verbosity: 1})
}
