// Package netnstest gives tests real Linux network stacks on a switch's segment: a network
// namespace with a TAP device whose frames are relayed to the segment's socket as QEMU's
// dgram netdev would, and sockets opened inside such a namespace from the test itself. It
// needs root and iproute2; it is for tests only (netswitch's, the load balancer's).
package netnstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// maxFrame is a datagram's largest size (netswitch's).
const maxFrame = 65536

// AddNamespace makes a network namespace for the test and removes it when the test ends.
func AddNamespace(t testing.TB, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root: a network namespace and a TAP device")
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("cannot make a network namespace (ip, from iproute2, is needed): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
}

// InNS runs a command in namespace ns and fails the test if it fails.
func InNS(t testing.TB, ns string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("%s:\n%s", strings.Join(args, " "), out)
}

// In runs f on a thread that has entered namespace ns, then brings the thread back: a
// socket f opens lives in ns for good.
func In(ns string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with its goroutine rather than run others
		// in the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("returning from namespace %s: %w", ns, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// OpenTAP creates a TAP device called name in namespace ns (the device is made in the
// namespace of the thread that creates it).
func OpenTAP(t testing.TB, ns, name string) *os.File {
	t.Helper()
	var fd int
	err := In(ns, func() error {
		var err error
		if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("cannot create a TAP device: %v", err)
	}
	return os.NewFile(uintptr(fd), "tap")
}

// RelayFrames plays QEMU: frames from the TAP go to the segment socket, frames from the
// switch to the TAP, until the test ends.
func RelayFrames(t testing.TB, tap *os.File, conn *net.UnixConn, segment string) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, maxFrame)
		for {
			n, err := tap.Read(buf)
			if err != nil {
				return
			}
			if _, err := conn.WriteToUnix(buf[:n], &net.UnixAddr{Name: segment, Net: "unixgram"}); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Logf("relay to the switch: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, maxFrame)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			_, _ = tap.Write(buf[:n])
		}
	}()
	t.Cleanup(func() { tap.Close(); conn.Close(); wg.Wait() })
}

// Listen opens a TCP listener at addr inside namespace ns, closed when the test ends.
func Listen(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := In(ns, func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listening at %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Dial connects from inside namespace ns to addr.
func Dial(ns, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := In(ns, func() (err error) { c, err = net.DialTimeout("tcp", addr, timeout); return err })
	return c, err
}
