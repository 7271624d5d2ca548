package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/anvil-dev/anvil/internal/registrynet"
)

// OutboundProxy is where a guest on a network with outbound access (Network.Outbound)
// finds its HTTP proxy: an address of its own 10.0.2.0/24 network, forwarded like any
// other (guestfwd) to the outbound command, `anvil forward --outbound`.
const OutboundProxy = "10.0.2.4:3128"

// outboundTimeout bounds the proxy's name lookup and its connection to the destination.
const outboundTimeout = 10 * time.Second

// outboundRequestTimeout bounds the wait for the guest's proxy request: a guest that opens
// connections and sends nothing would otherwise hold a process of the host's each.
var outboundRequestTimeout = 30 * time.Second

// maxProxyRequest bounds the request line and headers a guest sends the proxy: the
// proxy is a process on the host, its memory not the guest's to fill.
const maxProxyRequest = 64 << 10

// outboundTarget is the host:port a proxy request asks for: CONNECT's authority, or the
// host of a plain-HTTP request's absolute URL (port 80 unless it names one). Anything else
// (an origin-form request meant for a server, another scheme) is refused with the reason.
func outboundTarget(req *http.Request) (host string, port int, err error) {
	authority := req.Host
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, fmt.Errorf("%s %s: this proxy takes CONNECT host:port, or a request for an absolute http:// URL", req.Method, req.RequestURI)
		}
		authority = req.URL.Host
		if req.URL.Port() == "" {
			authority = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	h, p, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: want host:port", req.Method, authority)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("%s %s: bad port %q", req.Method, authority, p)
	}
	return h, int(n), nil
}

// outboundAddresses are the addresses of host the proxy may connect to: all of them
// public (registrynet.Kind), or an error naming the first that is not. Every address is
// checked, not only the one dialled, so a name that resolves to both a public and a
// loopback address is refused rather than left to the resolver's order.
func outboundAddresses(host string, ips []netip.Addr) ([]netip.Addr, error) {
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	for _, ip := range ips {
		if kind := registrynet.Kind(ip); kind != "" {
			if literal, err := netip.ParseAddr(host); err != nil || literal != ip {
				return nil, fmt.Errorf("%s resolves to %s, a %s address: outbound access reaches public addresses only", host, ip, kind)
			}
			return nil, fmt.Errorf("%s is a %s address: outbound access reaches public addresses only", host, kind)
		}
	}
	return ips, nil
}

// Outbound serves one guest connection to the outbound proxy (in and out are the guest's
// connection, as QEMU gives it to the command it runs per connection): it reads one proxy
// request, resolves its host here, refuses it with 403 and the reason when any address is
// not public (loopback, private, link-local, reserved: the host itself, its management
// network, a metadata service), and otherwise connects to a checked address (no second
// lookup, so no DNS rebinding) and joins the two. A plain-HTTP request is sent on with
// Connection: close, so one connection carries one request to one checked host.
func Outbound(in io.Reader, out io.Writer) error {
	limit := &io.LimitedReader{R: in, N: maxProxyRequest}
	br := bufio.NewReader(limit)
	type read struct {
		req *http.Request
		err error
	}
	got := make(chan read, 1)
	go func() {
		req, err := http.ReadRequest(br)
		got <- read{req, err}
	}()
	var req *http.Request
	select {
	case r := <-got:
		if r.err != nil {
			return proxyRefuse(out, http.StatusBadRequest, fmt.Errorf("reading the proxy request: %w", r.err))
		}
		req = r.req
	case <-time.After(outboundRequestTimeout):
		// The reader stays blocked; the command's process ends when Outbound returns.
		return proxyRefuse(out, http.StatusRequestTimeout, fmt.Errorf("no proxy request within %s", outboundRequestTimeout))
	}
	limit.N = math.MaxInt64 // the request is read; what follows is the guest's stream
	host, port, err := outboundTarget(req)
	if err != nil {
		return proxyRefuse(out, http.StatusBadRequest, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), outboundTimeout)
	defer cancel()
	ips, err := registrynet.Resolve(ctx, host, outboundTimeout)
	if err == nil {
		ips, err = outboundAddresses(host, ips)
	}
	if err != nil {
		return proxyRefuse(out, http.StatusForbidden, err)
	}
	var conn net.Conn
	var errs []error
	for _, ip := range ips {
		d := net.Dialer{Timeout: outboundTimeout}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			conn = c
			break
		}
		errs = append(errs, err)
	}
	if conn == nil {
		return proxyRefuse(out, http.StatusBadGateway, errors.Join(errs...))
	}
	defer conn.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(out, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return err
		}
	} else {
		req.Close = true
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		if err := req.Write(conn); err != nil { // origin form: the path, Host kept
			return proxyRefuse(out, http.StatusBadGateway, err)
		}
		_, err := io.Copy(out, conn)
		return err
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, conn)
		close(done)
	}()
	_, _ = io.Copy(conn, br) // br holds what the guest sent after the request
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
	<-done
	return nil
}

// proxyRefuse answers the guest with status and the reason, which is the guest's to read
// (unlike Forward's failures, the guest speaks HTTP to the proxy), and returns the reason.
func proxyRefuse(out io.Writer, status int, reason error) error {
	body := "anvil outbound proxy: " + reason.Error() + "\n"
	_, _ = fmt.Fprintf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	return reason
}
