package guestssh

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// serve runs an SSH server on a loopback port with hostPEM as its host key, authorizing
// only authorized; each session answers "ran: COMMAND" on stdout and exits 0, or exits 3
// for "fail"; "both" also writes ", and stderr" on stderr. Like sshd, it answers only after
// the client has started reading both streams, and ends both when the command ends.
func serve(t *testing.T, hostPEM string, authorized ssh.PublicKey) string {
	t.Helper()
	host, err := ssh.ParsePrivateKey([]byte(hostPEM))
	if err != nil {
		t.Fatal(err)
	}
	config := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) == string(authorized.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("not authorized")
	}}
	config.AddHostKey(host)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go handle(conn, config)
		}
	}()
	return l.Addr().String()
}

func handle(conn net.Conn, config *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		conn.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		ch, requests, err := nc.Accept()
		if err != nil {
			continue
		}
		for req := range requests {
			if req.Type != "exec" {
				_ = req.Reply(false, nil)
				continue
			}
			command := string(req.Payload[4:])
			_ = req.Reply(true, nil)
			status := byte(0)
			if command == "fail" {
				status = 3
			}
			time.Sleep(100 * time.Millisecond)
			_, _ = ch.Write([]byte("ran: " + command))
			if command == "both" {
				_, _ = ch.Stderr().Write([]byte(", and stderr"))
			}
			_, _ = ch.SendRequest("exit-status", false, []byte{0, 0, 0, status})
			ch.Close()
		}
	}
}

func TestLogsInToTheGuestItConfiguredAndRunsCommands(t *testing.T) {
	id, err := NewIdentity("anvil")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, id.hostPEM, id.user.PublicKey())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := id.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out, err := Run(c, "uname -m"); err != nil || out != "ran: uname -m" {
		t.Errorf("Run = %q, %v", out, err)
	}
	var exit *ssh.ExitError
	if _, err := Run(c, "fail"); !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("a failing command gave %v, want exit status 3", err)
	}
	// Every session of the connection has its own output.
	if out, err := Run(c, "hostname"); err != nil || out != "ran: hostname" {
		t.Errorf("a later Run = %q, %v", out, err)
	}
	// Both streams, stdout first.
	if out, err := Run(c, "both"); err != nil || out != "ran: both, and stderr" {
		t.Errorf("Run of a command writing both streams = %q, %v", out, err)
	}

	// The cloud-config carries the user's public key and the host key pair the server uses.
	cfg := id.CloudConfig()
	for _, want := range []string{"name: anvil", "- ssh-ed25519 ", "ed25519_private: |", "BEGIN OPENSSH PRIVATE KEY", "ed25519_public: ssh-ed25519 "} {
		if !strings.Contains(cfg, want) {
			t.Errorf("cloud-config lacks %q:\n%s", want, cfg)
		}
	}
}

// Another process on the forwarded port (another guest, or anything listening there) has
// another host key: the login is refused, however long Dial keeps trying.
func TestRefusesAGuestWithAnotherHostKey(t *testing.T) {
	id, err := NewIdentity("anvil")
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := NewIdentity("anvil")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, impostor.hostPEM, id.user.PublicKey())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := id.Dial(ctx, addr); err == nil {
		c.Close()
		t.Fatal("logged in to a server with another host key")
	} else if !strings.Contains(err.Error(), "host key mismatch") {
		t.Errorf("error %v, want it to say the host key does not match", err)
	}
}

// A guest whose sshd starts late: Dial keeps trying until it answers.
func TestDialWaitsForSSHToStart(t *testing.T) {
	id, err := NewIdentity("anvil")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens yet
	go func() {
		time.Sleep(3 * time.Second)
		host, _ := ssh.ParsePrivateKey([]byte(id.hostPEM))
		config := &ssh.ServerConfig{NoClientAuth: true}
		config.AddHostKey(host)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		t.Cleanup(func() { l.Close() })
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go handle(conn, config)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := id.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
