package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// runAsAnvil, set in a child's environment, makes the test binary be anvil: the tests run
// `anvil forward` as separate processes, as QEMU does.
const runAsAnvil = "ANVIL_TEST_RUN_AS_ANVIL"

func TestMain(m *testing.M) {
	if os.Getenv(runAsAnvil) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// forwardProcess starts `anvil forward args...` as QEMU's guestfwd does: the guest's
// connection (one end of a socket pair) as its standard input and output. The other end is
// returned, for the test to play the guest.
func forwardProcess(t *testing.T, args ...string) (*exec.Cmd, *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	guest, child := os.NewFile(uintptr(fds[0]), "guest"), os.NewFile(uintptr(fds[1]), "qemu-side")
	cmd := exec.Command(os.Args[0], append([]string{"forward"}, args...)...)
	cmd.Env = append(os.Environ(), runAsAnvil+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child, child, child
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	return cmd, guest
}

// The attack: a guest opens 500 connections to a forwarded service (a registry that keeps
// them open), at once. QEMU starts an `anvil forward` per connection; with the cap (8 here)
// at most 8 of them live and reach the service, the rest end at once, and another machine's
// forward still answers. Driven as QEMU drives the command (the guest's connection as its
// standard streams, --machine and --max-connections as the runtime adds them), without
// booting a guest.
func TestGuestConnectionsCannotExhaustForwardProcesses(t *testing.T) {
	const attempts, limit = 500, 8
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := held.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			defer c.Close() // held open until the test ends
		}
	}()

	exited := make(chan struct{}, attempts)
	var guests []*os.File
	var cmds []*exec.Cmd
	for i := 0; i < attempts; i++ {
		cmd, guest := forwardProcess(t, "--machine", "qemu-attacker", "--max-connections", fmt.Sprint(limit), held.Addr().String())
		cmds, guests = append(cmds, cmd), append(guests, guest)
		go func() { _ = cmd.Wait(); exited <- struct{}{} }()
	}
	t.Cleanup(func() {
		for i, g := range guests {
			g.Close()
			_ = cmds[i].Process.Kill()
		}
	})
	deadline := time.After(2 * time.Minute)
	for n := 0; n < attempts-limit; n++ {
		select {
		case <-exited:
		case <-deadline:
			t.Fatalf("after 500 connections, %d forward processes still run (cap %d); the service holds %d connections", attempts-n, limit, reached.Load())
		}
	}
	select {
	case <-exited:
		t.Fatalf("fewer than %d forwards kept their connection", limit)
	case <-time.After(time.Second):
	}
	if got := reached.Load(); got != limit {
		t.Fatalf("the service got %d connections from one machine, want the cap %d", got, limit)
	}
	t.Logf("%d connections: %d forward processes ended at once, %d live", attempts, attempts-limit, limit)

	// Another machine's forward, meanwhile, answers.
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		_, _ = io.ReadFull(c, buf)
		_, _ = c.Write([]byte("pong"))
	}()
	cmd, guest := forwardProcess(t, "--machine", "qemu-neighbour", "--max-connections", fmt.Sprint(limit), echo.Addr().String())
	defer func() { guest.Close(); _ = cmd.Wait() }()
	if _, err := guest.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = guest.SetReadDeadline(time.Now().Add(30 * time.Second))
	answer := make([]byte, 4)
	if _, err := io.ReadFull(guest, answer); err != nil || string(answer) != "pong" {
		t.Fatalf("the other machine's forward answered %q, %v", answer, err)
	}
}
