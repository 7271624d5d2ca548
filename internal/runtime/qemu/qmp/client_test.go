package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// fakeServer is a QMP peer on a unix socket: it greets, insists on qmp_capabilities first,
// and answers each command with what handle returns, written by the test.
type fakeServer struct {
	path string
	l    net.Listener
	// handle answers commands; nil makes a server that accepts but never greets, like a
	// monitor busy with another client.
	handle func(w *peer, cmd map[string]any)
}

// peer is the server side of one connection.
type peer struct {
	conn net.Conn
	t    *testing.T
}

func (p *peer) send(v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		p.t.Error(err)
		return
	}
	p.conn.Write(append(raw, '\n'))
}

func (p *peer) reply(cmd map[string]any, ret any) {
	p.send(map[string]any{"return": ret, "id": cmd["id"]})
}

func (p *peer) event(name string, data any) {
	p.send(map[string]any{"event": name, "data": data, "timestamp": map[string]any{"seconds": 1700000000, "microseconds": 5}})
}

func startServer(t *testing.T, handle func(*peer, map[string]any)) *fakeServer {
	t.Helper()
	s := &fakeServer{path: filepath.Join(t.TempDir(), "qmp.sock"), handle: handle}
	l, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(t, conn)
		}
	}()
	return s
}

func (s *fakeServer) serve(t *testing.T, conn net.Conn) {
	defer conn.Close()
	p := &peer{conn: conn, t: t}
	if s.handle == nil {
		io.Copy(io.Discard, conn) // until the client gives up
	}
	p.send(map[string]any{"QMP": map[string]any{"version": map[string]any{"qemu": map[string]any{"major": 7, "minor": 2, "micro": 1}, "package": "fake"}, "capabilities": []string{"oob"}}})
	sc := bufio.NewScanner(conn)
	negotiated := false
	for sc.Scan() {
		var cmd map[string]any
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			p.send(map[string]any{"error": map[string]any{"class": "GenericError", "desc": "JSON parse error"}})
			continue
		}
		if !negotiated {
			if cmd["execute"] != "qmp_capabilities" {
				p.send(map[string]any{"id": cmd["id"], "error": map[string]any{"class": "CommandNotFound", "desc": "Expecting capabilities negotiation with 'qmp_capabilities'"}})
				continue
			}
			negotiated = true
			p.reply(cmd, map[string]any{})
			continue
		}
		if cmd["execute"] == "close" { // the test's way to make the server hang up
			return
		}
		s.handle(p, cmd)
	}
}

func dial(t *testing.T, s *fakeServer) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestExecuteDecodesTheReturnValue(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) {
		if cmd["execute"] == "query-status" {
			p.reply(cmd, map[string]any{"status": "running", "running": true})
		}
	})
	c := dial(t, s)
	if v := c.Version(); v.String() != "7.2.1" || v.Package != "fake" {
		t.Errorf("version %v", v)
	}
	st, err := c.QueryStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Status != "running" {
		t.Errorf("status %+v", st)
	}
}

func TestErrorRepliesAreTyped(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) {
		p.send(map[string]any{"id": cmd["id"], "error": map[string]any{"class": "DeviceNotFound", "desc": "Device 'x' not found"}})
	})
	c := dial(t, s)
	err := c.Execute(context.Background(), "device_del", map[string]string{"id": "x"}, nil)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "DeviceNotFound" {
		t.Fatalf("error %v, want a DeviceNotFound *Error", err)
	}
}

func TestEventsInterleavedWithReplies(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) {
		p.event("STOP", nil)
		p.event("DEVICE_DELETED", map[string]any{"device": "dev-vol1", "path": "/machine/peripheral/dev-vol1"})
		p.reply(cmd, map[string]any{})
		p.event("RESUME", nil)
	})
	c := dial(t, s)
	if err := c.Execute(context.Background(), "device_del", map[string]string{"id": "dev-vol1"}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"STOP", "DEVICE_DELETED", "RESUME"}
	for _, name := range want {
		select {
		case ev := <-c.Events():
			if ev.Name != name {
				t.Fatalf("event %s, want %s", ev.Name, name)
			}
			if ev.Name == "DEVICE_DELETED" {
				var d struct{ Device string }
				if err := json.Unmarshal(ev.Data, &d); err != nil || d.Device != "dev-vol1" {
					t.Errorf("DEVICE_DELETED data %s", ev.Data)
				}
			}
			if ev.Time.Unix() != 1700000000 {
				t.Errorf("event time %v", ev.Time)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", name)
		}
	}
}

// Replies are matched to their commands by id, whatever order they come in.
func TestRepliesOutOfOrder(t *testing.T) {
	held := make(chan map[string]any, 1)
	s := startServer(t, func(p *peer, cmd map[string]any) {
		switch cmd["execute"] {
		case "slow":
			held <- cmd
		case "fast":
			p.reply(cmd, "fast")
			p.reply(<-held, "slow")
		}
	})
	c := dial(t, s)
	slow := make(chan string, 1)
	go func() {
		var r string
		if err := c.Execute(context.Background(), "slow", nil, &r); err != nil {
			t.Error(err)
		}
		slow <- r
	}()
	for len(held) == 0 {
		time.Sleep(time.Millisecond)
	}
	var r string
	if err := c.Execute(context.Background(), "fast", nil, &r); err != nil || r != "fast" {
		t.Fatalf("fast: %q %v", r, err)
	}
	if got := <-slow; got != "slow" {
		t.Fatalf("slow got %q", got)
	}
}

func TestContextEndsAWaitAndTheConnectionStaysUsable(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) {
		if cmd["execute"] == "query-status" {
			p.reply(cmd, map[string]any{"status": "paused"})
		} // anything else is never answered
	})
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Execute(ctx, "never", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline", err)
	}
	if st, err := c.QueryStatus(context.Background()); err != nil || st.Status != "paused" {
		t.Fatalf("after a timeout: %+v %v", st, err)
	}
}

func TestDialGivesUpWithoutAGreeting(t *testing.T) {
	s := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Dial(ctx, s.path); err == nil {
		t.Fatal("dial succeeded without a greeting")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("dial did not honour its context")
	}
}

func TestHangUpEndsPendingCommandsAndKeepsEarlierEvents(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) {
		if cmd["execute"] == "quit" {
			p.event("SHUTDOWN", map[string]any{"guest": false, "reason": "host-qmp-quit"})
			p.conn.Close() // QEMU exits before replying
		}
	})
	c := dial(t, s)
	if err := c.Quit(context.Background()); err != nil {
		t.Fatalf("quit: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the hang-up")
	}
	if !errors.Is(c.Err(), ErrClosed) {
		t.Errorf("Err %v, want ErrClosed", c.Err())
	}
	ev, ok := <-c.Events()
	if !ok || ev.Name != "SHUTDOWN" {
		t.Fatalf("event %v %v, want the SHUTDOWN sent before the hang-up", ev, ok)
	}
	if _, ok := <-c.Events(); ok {
		t.Fatal("events channel open after the last event of a closed connection")
	}
	if err := c.Execute(context.Background(), "query-status", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("command after close: %v, want ErrClosed", err)
	}
}

func TestPendingCommandEndsWhenThePeerHangsUp(t *testing.T) {
	s := startServer(t, func(p *peer, cmd map[string]any) { p.conn.Close() })
	c := dial(t, s)
	if err := c.Execute(context.Background(), "system_powerdown", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
}
