package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/anvil-dev/anvil/internal/netswitch"
)

// dialTimeout bounds each try of a backend: a machine that stopped answering costs a
// connection this long before the next backend is tried.
const dialTimeout = 3 * time.Second

// Segments is the part of the switch a Server uses (netswitch.Switch).
type Segments interface {
	DialTCP(ctx context.Context, segment string, addr netip.AddrPort) (net.Conn, error)
	ListenTCP(segment string, port uint16) (net.Listener, error)
}

// Server holds the listeners of the load balancers served in this process: one on the
// host's Host address and one at the segment's gateway each, both sending every connection
// to a backend on the segment, tried in turn from a rotating start until one answers.
type Server struct {
	host     netip.Addr
	segments Segments
	log      logr.Logger

	ctx context.Context // ends every listener and connection

	mu     sync.Mutex
	served map[string]*served // by key (namespace/name)
}

// NewServer returns a Server listening on host (a loopback address) and at the gateways of
// segments, until ctx ends.
func NewServer(ctx context.Context, host netip.Addr, segments Segments, log logr.Logger) *Server {
	s := &Server{host: host, segments: segments, log: log, ctx: ctx, served: map[string]*served{}}
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for key, sv := range s.served {
			sv.close()
			delete(s.served, key)
		}
	})
	return s
}

// served is one load balancer's listeners and backends.
type served struct {
	port    uint16
	segment string
	hostL   net.Listener
	segL    net.Listener // nil while the segment is closed

	mu       sync.Mutex
	backends []netip.AddrPort
	next     int
}

// Serving is what Serve did.
type Serving struct {
	// Port is the port listened at, on the host and at the gateway.
	Port uint16
	// SegmentOpen says whether it listens at the segment's gateway too.
	SegmentOpen bool
	// SegmentErr says why it does not, when the segment is open: try again soon.
	SegmentErr error
}

// Serve makes key's load balancer listen and send connections to backends. A load balancer
// already served keeps its port (port is then ignored) and gets the new backends; a new one
// listens at port on the host (the error says why it cannot). Its segment listener is
// opened whenever the segment is open and it has none (the segment closes with its last
// machine, and the listener with it).
func (s *Server) Serve(key, segment string, port uint16, backends []netip.AddrPort) (Serving, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return Serving{}, errors.New("the load balancer server has stopped")
	}
	sv := s.served[key]
	if sv == nil {
		l, err := net.Listen("tcp", netip.AddrPortFrom(s.host, port).String())
		if err != nil {
			return Serving{}, err
		}
		sv = &served{port: port, segment: segment, hostL: l}
		s.served[key] = sv
		go s.accept(key, sv, l)
		s.log.Info("Listening", "loadBalancer", key, "address", l.Addr().String())
	}
	sv.mu.Lock()
	sv.backends = backends
	sv.mu.Unlock()
	var segErr error
	if sv.segL == nil {
		l, err := s.segments.ListenTCP(sv.segment, sv.port)
		switch {
		case err == nil:
			sv.segL = l
			go s.accept(key, sv, l)
			s.log.Info("Listening on the segment", "loadBalancer", key, "address", l.Addr().String())
		case errors.Is(err, netswitch.ErrSegmentNotOpen):
			// It opens with the namespace's first machine on it, which reconciles again.
		default:
			segErr = err
			s.log.Info("Cannot listen on the segment yet", "loadBalancer", key, "error", err.Error())
		}
	}
	return Serving{Port: sv.port, SegmentOpen: sv.segL != nil, SegmentErr: segErr}, nil
}

// Ports are the ports of the load balancers served: a new one is never given one of them,
// whatever the status the controller reads says yet.
func (s *Server) Ports() map[uint16]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint16]bool{}
	for _, sv := range s.served {
		out[sv.port] = true
	}
	return out
}

// Stop closes key's listeners and the connections they accepted (a no-op when it is not
// served).
func (s *Server) Stop(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv := s.served[key]; sv != nil {
		sv.close()
		delete(s.served, key)
		s.log.Info("Stopped", "loadBalancer", key)
	}
}

func (sv *served) close() {
	sv.hostL.Close()
	if sv.segL != nil {
		sv.segL.Close()
	}
}

// accept serves l until it is closed. When it is the segment listener and the segment
// closed under it, it is forgotten, so the next Serve listens again.
func (s *Server) accept(key string, sv *served, l net.Listener) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			if sv.segL == l {
				sv.segL = nil
			}
			s.mu.Unlock()
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error(err, "Accepting", "loadBalancer", key, "address", l.Addr().String())
			}
			return
		}
		go s.forward(ctx, key, sv, c)
	}
}

// forward sends c to the first backend that answers, starting one further each time, and
// copies both ways until either side ends; ctx's end (the listener's) ends it too.
func (s *Server) forward(ctx context.Context, key string, sv *served, c net.Conn) {
	defer c.Close()
	sv.mu.Lock()
	backends, start := sv.backends, sv.next
	sv.next++
	sv.mu.Unlock()
	var b net.Conn
	var errs []error
	for i := range backends {
		addr := backends[(start+i)%len(backends)]
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		conn, err := s.segments.DialTCP(dctx, sv.segment, addr)
		cancel()
		if err == nil {
			b = conn
			break
		}
		errs = append(errs, err)
	}
	if b == nil {
		s.log.V(1).Info("No backend answered; connection closed", "loadBalancer", key, "from", c.RemoteAddr().String(),
			"backends", len(backends), "errors", fmt.Sprint(errors.Join(errs...)))
		return
	}
	defer b.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); b.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
}
