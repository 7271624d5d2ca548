package registrynet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// DefaultTimeout bounds each wait on a registry when a Policy sets none.
const DefaultTimeout = 30 * time.Second

// Policy is how a process talks to registries tenants name.
type Policy struct {
	// Timeout bounds each wait: connecting, the TLS handshake, the response's headers and
	// every read of its body, so a registry that accepts and then goes silent fails the
	// call instead of holding it. It does not bound a transfer that keeps moving.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// Allow lists the non-public registries that may be reached; every other loopback,
	// link-local or private address is refused.
	Allow []Allowed
	// AnyAddress turns the address check off, for a process whose own network is the
	// boundary (a build agent inside its builder guest).
	AnyAddress bool
	// Logins are the credentials presented to registries by address ("host:port", as a
	// reference names the registry): a pool's read-only identity for an infrastructure
	// registry that refuses anonymous reads. Every other registry is read anonymously,
	// so a tenant naming a registry of its own never receives them.
	Logins map[string]Login
}

// Login is a user name and password for HTTP basic auth.
type Login struct {
	Username, Password string
}

func (p Policy) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// Transport returns a new HTTP transport that applies the policy. It uses no proxy: a
// proxy would make the connection the policy checks a connection to the proxy.
func (p Policy) Transport() http.RoundTripper {
	t := p.httpTransport()
	if len(p.Logins) == 0 {
		return t
	}
	return &loginTransport{next: t, logins: p.Logins}
}

func (p Policy) httpTransport() *http.Transport {
	t := p.timeout()
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           p.dial,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   t,
		ResponseHeaderTimeout: t,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
	}
}

// dial resolves the host, checks every address it resolves to, and connects to a checked
// address (never resolving again), each read then bounded by the timeout.
func (p Policy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("registry %s: port %q", addr, portStr)
	}
	d := &net.Dialer{Timeout: p.timeout(), KeepAlive: 30 * time.Second}
	ips, err := Resolve(ctx, host, p.timeout())
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", addr, err)
	}
	if !p.AnyAddress {
		// Every address, not only the one dialled: which one a later connection gets is
		// the resolver's choice.
		for _, ip := range ips {
			if err := Check(host, ip, port, p.Allow); err != nil {
				return nil, err
			}
		}
	}
	var errs []error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return &idleConn{Conn: c, timeout: p.timeout()}, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("registry %s: %w", addr, errors.Join(errs...))
}

// idleConn fails a read that waits longer than timeout for its first byte.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("registry %s sent nothing for %s: %w", c.Conn.RemoteAddr(), c.timeout, err)
	}
	return n, err
}

// Resolve is host's addresses: host itself when it is one, else what the resolver says
// within timeout. A caller checks every address and connects to a checked one, never
// resolving again (no DNS rebinding between the check and the connection).
func Resolve(ctx context.Context, host string, timeout time.Duration) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(rctx, "ip", host)
}

// loginTransport presents a login on each request to its registry's exact address, and
// to no other: a redirect (a registry's blob storage elsewhere) gets none.
type loginTransport struct {
	next   http.RoundTripper
	logins map[string]Login
}

func (t *loginTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l, ok := t.logins[r.URL.Host]
	if !ok || r.Header.Get("Authorization") != "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change the request it is given
	r.SetBasicAuth(l.Username, l.Password)
	return t.next.RoundTrip(r)
}
