package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

// A guest's forwarded connection to a service that is away gets nothing back: no error
// text it would read as the service's answer.
func TestForwardToAnAbsentServiceWritesNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs([]string{"forward", addr})
	cmd.SetIn(strings.NewReader("GET /v2/ HTTP/1.1\r\n\r\n"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.Execute(); !errors.Is(err, errQuiet) {
		t.Fatalf("forward to a closed port = %v, want errQuiet (main prints nothing)", err)
	}
	if out.Len() != 0 || errOut.Len() != 0 {
		t.Errorf("forward wrote %q and %q into the guest's connection", out.String(), errOut.String())
	}
}

func TestForwardCarriesBothDirections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, _ := io.ReadAll(c) // until the forward closes its side
		_, _ = c.Write(append([]byte("got "), req...))
	}()
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs([]string{"forward", l.Addr().String()})
	cmd.SetIn(strings.NewReader("ping"))
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "got ping" {
		t.Errorf("the guest got %q, want %q", out.String(), "got ping")
	}
}

// `anvil forward --outbound`, as QEMU runs it for a guest's connection to the outbound
// proxy, refuses the host's loopback in HTTP (the guest reads the reason) and fails quietly.
func TestForwardOutboundRefusesTheLoopback(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs([]string{"forward", "--outbound"})
	cmd.SetIn(strings.NewReader("CONNECT 127.0.0.1:2379 HTTP/1.1\r\n\r\n"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.Execute(); !errors.Is(err, errQuiet) {
		t.Fatalf("forward --outbound to the loopback = %v, want errQuiet", err)
	}
	if !strings.HasPrefix(out.String(), "HTTP/1.1 403 Forbidden\r\n") || !strings.Contains(out.String(), "127.0.0.1 is a loopback address") || errOut.Len() != 0 {
		t.Errorf("the guest got %q (stderr %q), want the proxy's 403 naming the loopback", out.String(), errOut.String())
	}
}

func TestNetworkNATFlag(t *testing.T) {
	var networks map[string]qemu.Network
	f := &networkOutbound{&networks}
	if err := (&networkForwards{&networks}).Set("web=10.0.2.100:80=127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"web", "internet"} {
		if err := f.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if !networks["web"].Outbound || len(networks["web"].Forwards) != 1 || !networks["internet"].Outbound {
		t.Errorf("networks = %+v, want web (one forward) and internet with outbound access", networks)
	}
	if err := f.Set("web=10.0.2.4:3128"); err == nil || !strings.Contains(err.Error(), "want a network name") {
		t.Errorf("--network-nat web=... = %v, want a refusal asking for a network name", err)
	}
}
