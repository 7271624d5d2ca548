package netswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	// gVisor's netstack, pinned in go.mod at v0.0.0-20250503011706-39ed1f5ac29c: its `go`
	// branch (the only form the module proxy serves), the version this machine's module
	// cache already held, and one that builds with Go 1.26.
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// gatewayNIC is the stack's only NIC.
const gatewayNIC tcpip.NICID = 1

// errSegmentClosed: the segment's last port went (or the switch closed) while in use.
var errSegmentClosed = errors.New("the segment is closed")

// gateway is a segment's TCP/IP stack at the gateway's address: IPv4, ARP and TCP, one NIC
// on the segment and one route, to the segment's subnet. It never forwards (gVisor's
// default, left off), so it is an end host of its segment, never a way off it.
type gateway struct {
	stack *stack.Stack
	link  *link
	cfg   segmentConfig

	ctx    context.Context // canceled by close: ends dials in flight
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool // under mu, so no listener or connection is made after close's sweep
}

// newGateway starts the stack; send gets each frame it sends.
func newGateway(cfg segmentConfig, send func(frame []byte)) (*gateway, error) {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
	})
	l := &link{send: send}
	g := &gateway{stack: s, link: l, cfg: cfg}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if err := g.configure(); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *gateway) configure() error {
	if err := g.stack.CreateNIC(gatewayNIC, g.link); err != nil {
		return fmt.Errorf("creating the gateway's NIC: %s", err)
	}
	addr := tcpip.ProtocolAddress{
		Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address: tcpip.AddrFrom4(g.cfg.gateway.As4()), PrefixLen: g.cfg.subnet.Bits(),
		},
	}
	if err := g.stack.AddProtocolAddress(gatewayNIC, addr, stack.AddressProperties{}); err != nil {
		return fmt.Errorf("adding the gateway's address: %s", err)
	}
	subnet := addr.AddressWithPrefix.Subnet()
	g.stack.SetRouteTable([]tcpip.Route{{Destination: subnet, NIC: gatewayNIC}})
	return nil
}

// dial connects from the gateway to addr, an address of the segment.
func (g *gateway) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if err := checkHostAddr(g.cfg.subnet, addr.Addr()); err != nil || addr.Addr() == g.cfg.gateway || addr.Port() == 0 {
		return nil, fmt.Errorf("%s is not an address and port of a port of subnet %s", addr, g.cfg.subnet)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.ctx, cancel)()
	c, err := gonet.DialContextTCP(ctx, g.stack, fullAddress(addr), ipv4.ProtocolNumber)
	if err != nil {
		if g.ctx.Err() != nil {
			return nil, fmt.Errorf("connecting to %s: %w", addr, errSegmentClosed)
		}
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		c.Close()
		return nil, fmt.Errorf("connecting to %s: %w", addr, errSegmentClosed)
	}
	return c, nil
}

// listen accepts connections to the gateway's address at port.
func (g *gateway) listen(port uint16) (net.Listener, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errSegmentClosed
	}
	l, err := listenReusingAddress(g.stack, fullAddress(netip.AddrPortFrom(g.cfg.gateway, port)))
	if err != nil {
		return nil, fmt.Errorf("listening at %s:%d: %w", g.cfg.gateway, port, err)
	}
	return &listener{TCPListener: l, gw: g}, nil
}

// listenBacklog is a listener's queue of connections not yet accepted.
const listenBacklog = 128

// listenReusingAddress is gonet.ListenTCP with SO_REUSEADDR, as Go's net.Listen sets it:
// a listener closed and made again (a load balancer's, when its process restarts) binds
// its port while connections it accepted linger in TIME_WAIT.
func listenReusingAddress(s *stack.Stack, addr tcpip.FullAddress) (*gonet.TCPListener, error) {
	var wq waiter.Queue
	ep, terr := s.NewEndpoint(tcp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	ep.SocketOptions().SetReuseAddress(true)
	if terr := ep.Bind(addr); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("bind: %s", terr)
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("listen: %s", terr)
	}
	return gonet.NewTCPListener(s, &wq, ep), nil
}

// close ends every connection and listener (gVisor's Close aborts every endpoint) and
// waits for the stack's goroutines.
func (g *gateway) close() {
	g.mu.Lock()
	g.closed = true
	g.cancel()
	g.mu.Unlock()
	g.stack.Destroy()
}

func fullAddress(a netip.AddrPort) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: gatewayNIC, Addr: tcpip.AddrFrom4(a.Addr().As4()), Port: a.Port()}
}

// listener is gVisor's, with Accept's error saying net.ErrClosed once the listener or
// its segment is closed, as a net.Listener's does, so accept loops know to stop.
type listener struct {
	*gonet.TCPListener
	gw *gateway

	mu     sync.Mutex
	closed bool
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.Accept()
	if err == nil {
		return c, nil
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed || l.gw.ctx.Err() != nil {
		return nil, fmt.Errorf("accepting at %s: %w", l.Addr(), net.ErrClosed)
	}
	return nil, err
}

func (l *listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.TCPListener.Close()
}
