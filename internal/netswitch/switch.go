package netswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// ErrSegmentNotOpen: DialTCP or ListenTCP named a segment with no port attached.
var ErrSegmentNotOpen = errors.New("the segment is not open: no port is attached")

// Switch forwards frames between the ports of each segment and never between segments.
// Its methods may be called from any goroutine.
type Switch struct {
	dir string
	log logr.Logger
	// senders are the users whose processes' frames count (see New).
	senders map[uint32]bool

	mu       sync.Mutex
	closed   bool
	segments map[string]*segment // by name
	portSeg  map[string]string   // peer → name of its segment: a peer is on one segment
}

// New returns a switch whose segment sockets are in dir, made 0711: any user reaches a
// socket there (QEMU sends each frame by path, after dropping to its own user) and none
// lists them. A frame counts only when the kernel says (SO_PASSCRED) its sender runs as
// this process's user or one of senders (QEMU's), and it comes from a port's own socket
// path: a sender path alone proves nothing, since another user can bind any path in a
// mount namespace of its own. Socket files a crashed process left in dir are removed; a
// socket another process still serves is left alone.
func New(dir string, log logr.Logger, senders ...uint32) (*Switch, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("creating the switch's folder: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("opening the switch's folder: %w", err)
	}
	s := &Switch{dir: dir, log: log, segments: map[string]*segment{}, portSeg: map[string]string{},
		senders: map[uint32]bool{uint32(os.Geteuid()): true}}
	for _, uid := range senders {
		s.senders[uid] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the switch's folder: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if strings.HasSuffix(e.Name(), ".sock") && stale(path) {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("removing a stale segment socket: %w", err)
			}
			log.V(1).Info("Removed a stale segment socket", "path", path)
		}
	}
	return s, nil
}

// Attach adds p to seg (binding seg's socket on its first port; a stale socket file left by
// a crashed process is replaced) and returns the path QEMU's remote.path must name, and
// the port's address: p.IP, or, when p has none, the lowest free address of the segment,
// chosen under the switch's lock so that runtimes sharing the switch never give one
// address twice. Attaching the same Peer again replaces its entry; a segment attached
// again with another Subnet or Gateway is an error.
func (s *Switch) Attach(seg Segment, p Port) (string, netip.Addr, error) {
	cfg, err := segmentConfigOf(seg)
	if err != nil {
		return "", netip.Addr{}, err
	}
	path := SocketPath(s.dir, seg.Name)
	if len(path) > maxSocketPath {
		return "", netip.Addr{}, fmt.Errorf("segment %s: socket path %s is longer than %d bytes", seg.Name, path, maxSocketPath)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", netip.Addr{}, errors.New("the switch is closed")
	}
	sg := s.segments[seg.Name]
	t := newTable(cfg)
	if sg != nil {
		old := sg.table.Load()
		if old.cfg.subnet != cfg.subnet || old.cfg.gateway != cfg.gateway {
			return "", netip.Addr{}, fmt.Errorf("segment %s is %s with gateway %s, not %s with gateway %s",
				seg.Name, old.cfg.subnet, old.cfg.gateway, cfg.subnet, cfg.gateway)
		}
		t = old.without("") // a copy
		t.cfg.dns = cfg.dns // the latest Attach's
	}
	if !p.IP.IsValid() {
		if p.IP, err = AllocateIP(cfg.subnet, cfg.gateway, t.addressesExcept(p.Peer)); err != nil {
			return "", netip.Addr{}, fmt.Errorf("segment %s: %w", seg.Name, err)
		}
	}
	np, err := portOf(cfg, p)
	if err != nil {
		return "", netip.Addr{}, err
	}
	t, err = t.with(np)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("segment %s: %w", seg.Name, err)
	}
	if sg == nil {
		if sg, err = openSegment(seg.Name, path, t, s.senders, s.log.WithValues("segment", seg.Name)); err != nil {
			return "", netip.Addr{}, err
		}
		s.segments[seg.Name] = sg
		s.log.Info("Opened a segment", "segment", seg.Name, "subnet", cfg.subnet, "gateway", cfg.gateway, "socket", path)
	} else {
		sg.table.Store(t)
	}
	if prev, ok := s.portSeg[p.Peer]; ok && prev != seg.Name {
		s.detachLocked(p.Peer)
	}
	s.portSeg[p.Peer] = seg.Name
	s.log.V(1).Info("Attached a port", "segment", seg.Name, "peer", p.Peer, "mac", np.mac.String(), "ip", np.ip)
	return path, np.ip, nil
}

// Detach removes the port of peer (an unknown peer is a no-op); a segment left with no
// port closes its socket and removes its file.
func (s *Switch) Detach(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachLocked(peer)
}

func (s *Switch) detachLocked(peer string) {
	name, ok := s.portSeg[peer]
	if !ok {
		return
	}
	delete(s.portSeg, peer)
	sg := s.segments[name]
	t := sg.table.Load().without(peer)
	s.log.V(1).Info("Detached a port", "segment", name, "peer", peer)
	sg.table.Store(t) // before closing: the gateway's last frames must not reach the port
	if len(t.peers) > 0 {
		return
	}
	delete(s.segments, name)
	if err := sg.close(); err != nil {
		s.log.Error(err, "Closing a segment without ports", "segment", name)
		return
	}
	s.log.Info("Closed a segment without ports", "segment", name)
}

// DialTCP connects from segment's gateway to addr, an address of the segment (a VM's
// service, for the host to reach). The connection ends when the segment closes (its last
// port detached, or the switch closed). The segment must be open: a port attached.
func (s *Switch) DialTCP(ctx context.Context, segment string, addr netip.AddrPort) (net.Conn, error) {
	g, err := s.gatewayOf(segment)
	if err != nil {
		return nil, err
	}
	c, err := g.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", segment, err)
	}
	return c, nil
}

// ListenTCP accepts the connections the segment's VMs make to its gateway's address at
// port (0: any free port, see Addr). Closing the listener stops it; so does the segment
// closing, after which Accept's error is net.ErrClosed. The segment must be open.
func (s *Switch) ListenTCP(segment string, port uint16) (net.Listener, error) {
	g, err := s.gatewayOf(segment)
	if err != nil {
		return nil, err
	}
	l, err := g.listen(port)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", segment, err)
	}
	return l, nil
}

func (s *Switch) gatewayOf(segment string) (*gateway, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg := s.segments[segment]
	if sg == nil {
		return nil, fmt.Errorf("segment %s: %w", segment, ErrSegmentNotOpen)
	}
	return sg.gw, nil
}

// Close closes every segment socket and removes the socket files. The switch cannot be
// used afterwards.
func (s *Switch) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	names := make([]string, 0, len(s.segments))
	for name := range s.segments {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		errs = append(errs, s.segments[name].close())
	}
	s.segments = map[string]*segment{}
	s.portSeg = map[string]string{}
	return errors.Join(errs...)
}
