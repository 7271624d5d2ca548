package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
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
