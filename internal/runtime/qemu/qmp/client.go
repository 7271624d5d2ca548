package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned for commands whose connection ended before their reply came.
var ErrClosed = errors.New("qmp: connection closed")

// maxQueuedEvents bounds the events kept for a reader that does not keep up; older ones
// are dropped first. Callers treat events as triggers and query state anyway.
const maxQueuedEvents = 1024

// Client is one QMP connection. Its methods are safe for concurrent use.
type Client struct {
	conn    net.Conn
	version Version

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan message
	queue   []Event
	wake    chan struct{}
	err     error

	events chan Event
	done   chan struct{}
	// closing ends event delivery when the caller closes the client.
	closing   chan struct{}
	closeOnce sync.Once
}

// Dial connects to the QMP socket at path, reads the greeting and leaves capability
// negotiation mode. ctx bounds the whole handshake: a monitor already serving another
// client accepts the connection but never greets.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: connecting to %s: %w", path, err)
	}
	c, err := handshake(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: %s: %w", path, err)
	}
	return c, nil
}

func handshake(ctx context.Context, conn net.Conn) (*Client, error) {
	// A deadline in the past unblocks the greeting read when ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	dec := json.NewDecoder(conn)
	var g greeting
	err := dec.Decode(&g)
	if !stop() {
		return nil, fmt.Errorf("waiting for the greeting: %w", ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("reading the greeting: %w", err)
	}
	if g.QMP == nil {
		return nil, errors.New("the peer did not send a QMP greeting")
	}
	c := &Client{
		conn:    conn,
		version: Version{Major: g.QMP.Version.QEMU.Major, Minor: g.QMP.Version.QEMU.Minor, Micro: g.QMP.Version.QEMU.Micro, Package: g.QMP.Version.Package},
		pending: map[uint64]chan message{},
		wake:    make(chan struct{}, 1),
		events:  make(chan Event),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	go c.read(dec)
	go c.pump()
	if err := c.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Version is the QEMU version the greeting announced.
func (c *Client) Version() Version { return c.version }

// Events delivers events in the order QEMU sent them. After the connection ends it still
// delivers the events that arrived before, then it is closed.
func (c *Client) Events() <-chan Event { return c.events }

// Done is closed once the connection has ended, for example because QEMU exited.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended; nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection and event delivery. QEMU keeps running. Always call it, even
// after Done: it releases the goroutine that delivers events.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	err := c.conn.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Execute runs a command and decodes its return value into result (unless nil). A QEMU
// error reply is an *Error. When ctx ends first, the reply is discarded on arrival.
func (c *Client) Execute(ctx context.Context, name string, args, result any) error {
	return c.execute(ctx, name, args, result, nil)
}

// ExecuteWithFile runs a command that takes a file descriptor (add-fd, getfd): f goes
// with the command's bytes (SCM_RIGHTS). QEMU gets its own copy; the caller closes f.
func (c *Client) ExecuteWithFile(ctx context.Context, name string, args, result any, f *os.File) error {
	return c.execute(ctx, name, args, result, f)
}

func (c *Client) execute(ctx context.Context, name string, args, result any, f *os.File) error {
	reply := make(chan message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", name, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = reply
	c.mu.Unlock()

	if err := c.send(ctx, command{Execute: name, Arguments: args, ID: id}, f); err != nil {
		c.forget(id)
		return fmt.Errorf("%s: %w", name, err)
	}
	select {
	case m, ok := <-reply:
		if !ok {
			return fmt.Errorf("%s: %w", name, c.Err())
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %w", name, m.Error)
		}
		if result != nil && len(m.Return) > 0 {
			if err := json.Unmarshal(m.Return, result); err != nil {
				return fmt.Errorf("%s: decoding the reply: %w", name, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s: %w", name, ctx.Err())
	}
}

// Quit asks QEMU to exit. QEMU may close the connection before replying; that counts as
// success.
func (c *Client) Quit(ctx context.Context) error {
	err := c.Execute(ctx, "quit", nil, nil)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// QueryStatus returns the VM's run state (running, paused, shutdown, prelaunch...).
func (c *Client) QueryStatus(ctx context.Context) (Status, error) {
	var s Status
	err := c.Execute(ctx, "query-status", nil, &s)
	return s, err
}

func (c *Client) send(ctx context.Context, cmd command, f *os.File) error {
	raw, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		c.conn.SetWriteDeadline(d)
		defer c.conn.SetWriteDeadline(time.Time{})
	}
	if f == nil {
		_, err = c.conn.Write(append(raw, '\n'))
		return err
	}
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return errors.New("qmp: file descriptors need a unix socket")
	}
	_, _, err = uc.WriteMsgUnix(append(raw, '\n'), syscall.UnixRights(int(f.Fd())), nil)
	return err
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// read dispatches replies to their commands and queues events until the connection ends.
func (c *Client) read(dec *json.Decoder) {
	var err error
	for {
		var m message
		if err = dec.Decode(&m); err != nil {
			break
		}
		switch {
		case m.Event != "":
			c.enqueue(m)
		case m.ID != nil:
			c.mu.Lock()
			ch, ok := c.pending[*m.ID]
			delete(c.pending, *m.ID)
			c.mu.Unlock()
			if ok {
				ch <- m
			}
		}
		// A reply without an id answers a command QEMU could not parse; ours always
		// carry one, so there is nobody to give it to.
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) enqueue(m message) {
	ev := Event{Name: m.Event, Data: m.Data}
	if m.Timestamp != nil {
		ev.Time = time.Unix(m.Timestamp.Seconds, m.Timestamp.Microseconds*1000)
	}
	c.mu.Lock()
	if len(c.queue) >= maxQueuedEvents {
		c.queue = c.queue[1:]
	}
	c.queue = append(c.queue, ev)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pump hands queued events to the Events channel, so a slow reader never blocks replies.
func (c *Client) pump() {
	defer close(c.events)
	for {
		c.mu.Lock()
		var ev Event
		have := len(c.queue) > 0
		if have {
			ev = c.queue[0]
			c.queue = c.queue[1:]
		}
		ended := c.err != nil
		c.mu.Unlock()
		if !have {
			if ended {
				return
			}
			select {
			case <-c.wake:
			case <-c.done:
			case <-c.closing:
				return
			}
			continue
		}
		select {
		case c.events <- ev:
		case <-c.closing:
			return
		}
	}
}
