package qemu

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
)

// DefaultMaxForwardConnections is how many guest connections through its forwards (the
// outbound proxy's included) one machine may hold open at once, unless
// Config.MaxForwardConnections says otherwise. QEMU starts one `anvil forward` process per
// connection; without a cap one guest opening connections in a loop exhausts the host's
// memory or PIDs.
const DefaultMaxForwardConnections = 64

// ErrNoForwardSlot: the machine already holds its cap of forwarded connections.
var ErrNoForwardSlot = errors.New("the machine holds its cap of forwarded connections")

// AcquireForwardSlot takes one of max slots of machine key for the life of this process,
// or fails with ErrNoForwardSlot when all are taken. A slot is a Linux abstract unix socket
// bound under the key (nothing on disk, so QEMU's unprivileged user needs no writable
// folder); the kernel frees it when the process ends however it ends, so a killed forward
// never leaks a slot. Release frees it early.
//
// The names live in the host's network namespace: any local process could bind them and
// so use up a machine's slots (a denial of its forwards, nothing more); guests cannot.
func AcquireForwardSlot(key string, max int) (release func(), err error) {
	if max <= 0 {
		return func() {}, nil
	}
	for i := 0; i < max; i++ {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		// A leading NUL names an abstract socket.
		addr := &syscall.SockaddrUnix{Name: fmt.Sprintf("@anvil-forward/%s/%d", key, i)}
		err = syscall.Bind(fd, addr)
		if err == nil {
			return func() { _ = syscall.Close(fd) }, nil
		}
		_ = syscall.Close(fd)
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("forward slot %d of %s: %w", i, key, err)
		}
	}
	return nil, ErrNoForwardSlot
}

// ServeForwardArgs serves one guest connection on in/out as `anvil forward` does, from the
// words after "forward": [--machine ID --max-connections N] HOST:PORT | --outbound. Test
// binaries that stand in for anvil as QEMU's forward command use it, so they take the same
// command line the runtime writes.
func ServeForwardArgs(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 5 && args[0] == "--machine" && args[2] == "--max-connections" {
		max, err := strconv.Atoi(args[3])
		if err != nil {
			return fmt.Errorf("--max-connections %q: %w", args[3], err)
		}
		release, err := AcquireForwardSlot(args[1], max)
		if err != nil {
			return err
		}
		defer release()
		args = args[4:]
	}
	if len(args) != 1 {
		return fmt.Errorf("forward: want [--machine ID --max-connections N] HOST:PORT|%s, got %q", outboundFlag, args)
	}
	if args[0] == outboundFlag {
		return Outbound(in, out)
	}
	return Forward(in, out, args[0])
}
