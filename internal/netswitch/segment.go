package netswitch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

const (
	// maxFrame is the read buffer: the largest datagram QEMU's dgram netdev sends.
	maxFrame = 65536
	// errLogInterval: at most one unexpected socket error is logged per interval and segment.
	errLogInterval = 10 * time.Second
)

// segment is one segment's socket and the goroutine that reads it.
type segment struct {
	name, path string
	conn       *net.UnixConn
	raw        syscall.RawConn
	table      atomic.Pointer[table]
	senders    map[uint32]bool // read only
	gw         *gateway
	done       chan struct{} // closed when the reader has returned
	log        logr.Logger
	lastErrLog atomic.Int64 // unix nanoseconds: errors are logged by the reader and the stack
}

// openSegment binds the segment's socket and starts its reader. The socket file is made
// writable by anyone: who may reach it is decided by the folder's permissions, and a
// datagram from a socket that is not an attached port is dropped anyway.
func openSegment(name, path string, t *table, senders map[uint32]bool, log logr.Logger) (*segment, error) {
	conn, err := listen(path)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", name, err)
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		err = passCredentials(raw)
	}
	if err == nil {
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		conn.Close()
		os.Remove(path)
		return nil, fmt.Errorf("segment %s: %w", name, err)
	}
	sg := &segment{name: name, path: path, conn: conn, raw: raw, senders: senders, done: make(chan struct{}), log: log}
	sg.table.Store(t)
	if sg.gw, err = newGateway(t.cfg, sg.fromGateway); err != nil {
		conn.Close()
		os.Remove(path)
		return nil, fmt.Errorf("segment %s: %w", name, err)
	}
	go sg.run()
	return sg, nil
}

// listen binds a datagram socket at path, replacing a stale socket file there.
func listen(path string) (*net.UnixConn, error) {
	addr := &net.UnixAddr{Name: path, Net: "unixgram"}
	conn, err := net.ListenUnixgram("unixgram", addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return conn, err
	}
	if !stale(path) {
		return nil, fmt.Errorf("%s is a socket another process serves, or not a socket", path)
	}
	if err := os.Remove(path); err != nil {
		return nil, err
	}
	return net.ListenUnixgram("unixgram", addr)
}

// stale: path is a socket file no process has bound (a connection to it is refused), as
// a crashed switch leaves them. Any other file is not stale: it is never removed.
func stale(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		return false
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// close ends the gateway's connections and listeners (while the socket can still carry
// their resets), stops the reader, waits for it and removes the socket file.
func (sg *segment) close() error {
	sg.gw.close()
	err := sg.conn.Close()
	<-sg.done
	if rerr := os.Remove(sg.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// run reads frames until the socket is closed, and sends what decide says.
func (sg *segment) run() {
	defer close(sg.done)
	buf := make([]byte, maxFrame)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, flags, addr, err := sg.conn.ReadMsgUnix(buf, oob)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Not expected on a datagram socket; the pause keeps a lasting error from
			// spinning a core or filling the log.
			if sg.mayLogError() {
				sg.log.Error(err, "Reading the segment socket")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		from := ""
		if addr != nil {
			from = addr.Name
		}
		if flags&unix.MSG_TRUNC != 0 {
			sg.log.V(1).Info("Dropped a frame", "from", from, "reason", "larger than the read buffer")
			continue
		}
		if uid, ok := senderUID(oob[:oobn]); !ok || !sg.senders[uid] {
			sg.log.V(1).Info("Dropped a frame", "from", from, "reason", "sent by another user", "uid", uid)
			continue
		}
		d := sg.table.Load().decide(from, buf[:n])
		if d.drop != "" || d.dhcp != "" {
			sg.log.V(1).Info("Frame handled", "from", from, "drop", string(d.drop), "dhcp", d.dhcp)
		}
		if d.toStack != nil {
			sg.gw.link.deliver(d.toStack)
		}
		sg.sendAll(d.deliveries)
	}
}

// fromGateway switches a frame the gateway's stack sent; it runs on the stack's goroutines.
func (sg *segment) fromGateway(frame []byte) {
	d := sg.table.Load().fromGateway(frame)
	if d.drop != "" {
		sg.log.V(1).Info("Gateway's frame dropped", "drop", string(d.drop))
	}
	sg.sendAll(d.deliveries)
}

func (sg *segment) sendAll(deliveries []delivery) {
	for _, out := range deliveries {
		err := sg.send(out.to, out.frame)
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ECONNREFUSED):
			sg.log.V(1).Info("Port's socket is gone (its VM is stopped)", "to", out.to)
		case errors.Is(err, unix.EAGAIN):
			sg.log.V(1).Info("Port is not reading; frame dropped", "to", out.to)
		case errors.Is(err, net.ErrClosed): // the gateway's last frames, as the segment closes
		case sg.mayLogError(): // a guest cannot turn it into a log flood
			sg.log.Error(err, "Sending a frame", "to", out.to)
		}
	}
}

// mayLogError: no unexpected error was logged in the last errLogInterval; it claims the slot.
func (sg *segment) mayLogError() bool {
	now, last := time.Now().UnixNano(), sg.lastErrLog.Load()
	return now-last > int64(errLogInterval) && sg.lastErrLog.CompareAndSwap(last, now)
}

// send writes one frame to a port's socket without waiting: a port whose receive queue is
// full loses the frame, as on a congested Ethernet, rather than stall its whole segment.
func (sg *segment) send(to string, frame []byte) error {
	var sendErr error
	err := sg.raw.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), frame, unix.MSG_DONTWAIT, &unix.SockaddrUnix{Name: to})
		return true
	})
	if err != nil {
		return err
	}
	return sendErr
}

// passCredentials asks the kernel to attach each datagram's sender credentials.
func passCredentials(raw syscall.RawConn) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil {
		return err
	}
	return serr
}

// senderUID is the user id the kernel attached to a datagram (SO_PASSCRED); false when it
// attached none.
func senderUID(oob []byte) (uint32, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if cred, err := unix.ParseUnixCredentials(&m); err == nil {
			return cred.Uid, true
		}
	}
	return 0, false
}
