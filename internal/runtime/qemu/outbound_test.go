package qemu

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

func TestOutboundTarget(t *testing.T) {
	for _, tc := range []struct {
		name, request string
		host          string
		port          int
		err           string
	}{
		{"connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "example.com", 443, ""},
		{"connect v6", "CONNECT [2001:db8::1]:22 HTTP/1.1\r\n\r\n", "2001:db8::1", 22, ""},
		{"absolute http", "GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com", 80, ""},
		{"absolute http with port", "GET http://example.com:8080/a HTTP/1.1\r\n\r\n", "example.com", 8080, ""},
		{"origin form", "GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n", "", 0, "this proxy takes CONNECT host:port"},
		{"other scheme", "GET ftp://example.com/a HTTP/1.1\r\n\r\n", "", 0, "this proxy takes CONNECT host:port"},
		{"connect without port", "CONNECT example.com HTTP/1.1\r\n\r\n", "", 0, "want host:port"},
		{"connect port 0", "CONNECT example.com:0 HTTP/1.1\r\n\r\n", "", 0, "bad port"},
		{"connect port too big", "CONNECT example.com:70000 HTTP/1.1\r\n\r\n", "", 0, "bad port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.request)))
			if err != nil {
				t.Fatal(err)
			}
			host, port, err := outboundTarget(req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || host != tc.host || port != tc.port {
				t.Fatalf("= %q %d %v, want %q %d", host, port, err, tc.host, tc.port)
			}
		})
	}
}

func TestOutboundAddresses(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, tc := range []struct {
		name, host string
		ips        []netip.Addr
		err        string
	}{
		{"public", "example.com", addrs("93.184.216.34", "2606:2800:220:1::1"), ""},
		{"loopback literal", "127.0.0.1", addrs("127.0.0.1"), "127.0.0.1 is a loopback address"},
		{"v4-mapped loopback", "::ffff:127.0.0.1", addrs("::ffff:127.0.0.1"), "loopback"},
		{"nat64 loopback", "64:ff9b::7f00:1", addrs("64:ff9b::7f00:1"), "loopback"},
		{"unspecified reaches the loopback on Linux", "0.0.0.0", addrs("0.0.0.0"), "0.0.0.0 is a unspecified address"},
		{"qemu's gateway seen from the host", "10.0.2.2", addrs("10.0.2.2"), "private"},
		{"metadata service", "169.254.169.254", addrs("169.254.169.254"), "link-local"},
		{"management network", "mgmt.example", addrs("192.168.1.1"), "mgmt.example resolves to 192.168.1.1, a private address"},
		{"one public one loopback (rebinding)", "evil.example", addrs("93.184.216.34", "127.0.0.1"), "resolves to 127.0.0.1"},
		{"no address", "none.example", nil, "has no address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := outboundAddresses(tc.host, tc.ips)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.ips) {
				t.Fatalf("= %v %v, want all of %v", got, err, tc.ips)
			}
		})
	}
}

// outsideAddress is an address of this host that the outbound policy counts as public: the
// stand-in for the outside world, which a sandbox without internet cannot reach. Its
// absence fails the test rather than skipping it.
func outsideAddress(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && registrynet.Kind(p.Addr()) == "" {
			return p.Addr()
		}
	}
	t.Fatalf("this host has no IPv4 address the outbound policy counts as public (only %v): the outbound tests need one to stand in for the outside world", addrs)
	return netip.Addr{}
}

// listenOutside is a hostService on the outside address instead of the loopback.
func listenOutside(t *testing.T, name string) *hostService {
	t.Helper()
	return listenService(t, name, net.JoinHostPort(outsideAddress(t).String(), "0"))
}

// The proxy, run as QEMU runs it (one connection on its standard streams), connects a
// CONNECT to a public address and answers a refusal in HTTP for the loopback.
func TestOutboundProxiesPublicAndRefusesLoopback(t *testing.T) {
	outside := listenOutside(t, "outside")
	secret := listenHostService(t, "loopback")
	var out bytes.Buffer
	if err := Outbound(strings.NewReader("CONNECT "+outside.l.Addr().String()+" HTTP/1.1\r\n\r\n"), &out); err != nil {
		t.Fatal(err)
	}
	if want := "HTTP/1.1 200 Connection established\r\n\r\nhello-from-outside\n"; out.String() != want {
		t.Errorf("CONNECT to the outside answered %q, want %q", out.String(), want)
	}
	out.Reset()
	err := Outbound(strings.NewReader(fmt.Sprintf("CONNECT localhost:%d HTTP/1.1\r\n\r\n", secret.port())), &out)
	if err == nil || !strings.HasPrefix(out.String(), "HTTP/1.1 403 Forbidden\r\n") || !strings.Contains(out.String(), "loopback address: outbound access reaches public addresses only") {
		t.Errorf("CONNECT localhost = %v, answered %q; want 403 naming the loopback", err, out.String())
	}
	if n := secret.conns.Load(); n != 0 {
		t.Errorf("the loopback service was connected to %d times", n)
	}
}

// proxyProbe is a guest's shell lines that ask the outbound proxy for request (a request
// line, headers added) with busybox nc and print the answer under the probe's label.
func proxyProbe(label, requestLine string) string {
	return fmt.Sprintf("echo '== %s'\nprintf '%s\\r\\nHost: x\\r\\n\\r\\n' | nc -w 3 %s %s\necho\n",
		label, requestLine, strings.Split(OutboundProxy, ":")[0], strings.Split(OutboundProxy, ":")[1])
}

// probeSections splits a guest's probe output into label -> what answered.
func probeSections(out string) map[string]string {
	sections := map[string]string{}
	for _, part := range strings.Split(out, "== ")[1:] {
		label, body, _ := strings.Cut(part, "\n")
		sections[strings.TrimSpace(label)] = body
	}
	return sections
}

// A hostile guest on a network with outbound access tries the host's loopback every way
// it can name it: at QEMU's gateway directly, and through the outbound proxy by literal
// (127.0.0.1, 0.0.0.0, ::1, ::ffff:127.0.0.1, 127.1), by name (localhost), as the
// gateway 10.0.2.2 the proxy would see as private, as a plain-HTTP proxy request; and the
// metadata service and a private management address. Each is refused by the proxy (403)
// or not reached at all; the outside listener is reached, by CONNECT and by busybox
// wget's plain-HTTP proxying.
func TestGuestOutboundReachesOnlyPublicAddresses(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	outside := listenOutside(t, "outside")
	web := outsideHTTP(t)
	secret := listenHostService(t, "loopback")
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.Networks = map[string]Network{"internet": {Outbound: true}}
	cfg.ForwardCommand = forwardCommandForTest(t, cfg)
	rt := newRuntime(t, cfg)

	p := secret.port()
	refused := map[string]string{
		"proxy 127.0.0.1":        fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1", p),
		"proxy localhost":        fmt.Sprintf("CONNECT localhost:%d HTTP/1.1", p),
		"proxy 0.0.0.0":          fmt.Sprintf("CONNECT 0.0.0.0:%d HTTP/1.1", p),
		"proxy ::1":              fmt.Sprintf("CONNECT [::1]:%d HTTP/1.1", p),
		"proxy ::ffff:127.0.0.1": fmt.Sprintf("CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1", p),
		"proxy 127.1":            fmt.Sprintf("CONNECT 127.1:%d HTTP/1.1", p),
		"proxy gateway":          fmt.Sprintf("CONNECT 10.0.2.2:%d HTTP/1.1", p),
		"proxy plain http":       fmt.Sprintf("GET http://127.0.0.1:%d/ HTTP/1.1", p),
		"proxy metadata":         "CONNECT 169.254.169.254:80 HTTP/1.1",
		"proxy management":       "CONNECT 192.168.0.1:22 HTTP/1.1",
	}
	script := "#!/bin/sh\n"
	script += fmt.Sprintf("echo '== direct gateway'\necho probe | nc -w 2 10.0.2.2 %d\necho\n", p)
	script += fmt.Sprintf("echo '== direct outside'\necho probe | nc -w 2 %s\necho\n", strings.Replace(outside.l.Addr().String(), ":", " ", 1))
	for label, line := range refused {
		script += proxyProbe(label, line)
	}
	script += proxyProbe("proxy outside", "CONNECT "+outside.l.Addr().String()+" HTTP/1.1")
	script += fmt.Sprintf("echo '== wget outside'\nhttp_proxy=http://%s wget -q -O - http://%s/ \necho\n", OutboundProxy, web)
	script += "exit 0\n"

	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.NetworkInterfaces[0].Network = "internet"
	spec.FirstBoot.Data = []byte(script)
	m := create(t, rt, "outbound", spec)
	out := scriptOutput(t, await(t, rt, m.Metadata.Id, "ran", isRunning).Status.Console)
	t.Logf("guest on the network with outbound access:\n%s", out)

	got := probeSections(out)
	if !strings.Contains(got["proxy outside"], "200 Connection established") || !strings.Contains(got["proxy outside"], "hello-from-outside") {
		t.Errorf("CONNECT to the outside listener %s did not reach it: %q", outside.l.Addr(), got["proxy outside"])
	}
	if !strings.Contains(got["wget outside"], "hello-over-http") {
		t.Errorf("wget through the proxy did not reach the outside web server %s: %q", web, got["wget outside"])
	}
	for _, label := range []string{"direct gateway", "direct outside"} {
		if body, ok := got[label]; !ok || strings.Contains(body, "hello-from-") {
			t.Errorf("%s: a connection past the proxy answered (restrict=on must drop it): %q", label, body)
		}
	}
	for label := range refused {
		body, ok := got[label]
		if !ok || strings.Contains(body, "hello-from-") || !strings.Contains(body, "403 Forbidden") {
			t.Errorf("%s: want the proxy's 403, got %q", label, body)
		}
	}
	if n := secret.conns.Load(); n != 0 {
		t.Errorf("the host's loopback service was connected to %d times", n)
	}
}

// outsideHTTP is a web server on the outside address that answers every request with
// hello-over-http; it returns its host:port.
func outsideHTTP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(outsideAddress(t).String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello-over-http")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// A forward may not take the outbound proxy's address on a network that has the proxy.
func TestForwardCannotTakeTheOutboundProxysAddress(t *testing.T) {
	err := checkNetworks(map[string]Network{"internet": {Outbound: true, Forwards: []NetworkForward{{Guest: OutboundProxy, Target: "127.0.0.1:5000"}}}})
	if err == nil || !strings.Contains(err.Error(), "outbound proxy is there") {
		t.Errorf("checkNetworks = %v, want a refusal naming the proxy", err)
	}
	if err := checkNetworks(map[string]Network{"services": {Forwards: []NetworkForward{{Guest: OutboundProxy, Target: "127.0.0.1:5000"}}}}); err != nil {
		t.Errorf("a network without outbound access may use %s: %v", OutboundProxy, err)
	}
}

// A guest that opens a proxy connection and sends nothing gets 408 and the process ends,
// instead of holding a process of the host's for as long as it likes.
func TestOutboundEndsASilentConnection(t *testing.T) {
	defer func(d time.Duration) { outboundRequestTimeout = d }(outboundRequestTimeout)
	outboundRequestTimeout = 100 * time.Millisecond
	silent, w := io.Pipe()
	defer w.Close()
	var out bytes.Buffer
	err := Outbound(silent, &out)
	if err == nil || !strings.HasPrefix(out.String(), "HTTP/1.1 408 Request Timeout\r\n") {
		t.Errorf("a silent guest: %v, answered %q; want 408", err, out.String())
	}
}
