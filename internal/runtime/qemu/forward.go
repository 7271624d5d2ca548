package qemu

import (
	"errors"
	"io"
	"net"
	"time"
)

// ErrForwardUnreachable: Forward could not reach its target. The caller must not print
// it: QEMU gives the forward command the guest's connection as every standard stream.
var ErrForwardUnreachable = errors.New("forward target unreachable")

// Forward joins in and out (a guest's forwarded connection) to the TCP address target:
// the work of the command QEMU runs per connection (`anvil forward`). When target cannot
// be reached it writes nothing, so the guest sees the service as away and retries.
func Forward(in io.Reader, out io.Writer, target string) error {
	conn, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return ErrForwardUnreachable
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, conn)
		close(done)
	}()
	_, _ = io.Copy(conn, in)
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.CloseWrite() // the guest is done sending; the answer may still come
	}
	<-done
	return nil
}
