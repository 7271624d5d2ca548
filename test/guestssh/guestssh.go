// Package guestssh logs in to a guest over SSH the way a person would, to ask the OS itself
// what its first boot did (cloud-init's status, systemd's, the files it wrote). The test
// makes both keys: the user's, which cloud-init authorizes, and the guest's host key, which
// cloud-init installs (ssh_keys), so that the client checks it is talking to that guest and
// no other process on the forwarded port.
package guestssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Identity is one login: the user's key and the host key the guest is given.
type Identity struct {
	User    string
	user    ssh.Signer
	host    ssh.PublicKey
	hostPEM string
}

// NewIdentity makes fresh ed25519 keys for user.
func NewIdentity(user string) (*Identity, error) {
	_, userKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(userKey)
	if err != nil {
		return nil, err
	}
	hostPub, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(hostKey, "")
	if err != nil {
		return nil, err
	}
	host, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		return nil, err
	}
	return &Identity{User: user, user: signer, host: host, hostPEM: string(pem.EncodeToMemory(block))}, nil
}

// CloudConfig is the #cloud-config fragment (top-level keys, no header) that makes the
// user with the authorized key and passwordless sudo, and installs the host key.
func (id *Identity) CloudConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "users:\n  - name: %s\n    shell: /bin/bash\n    sudo: ALL=(ALL) NOPASSWD:ALL\n    ssh_authorized_keys:\n      - %s\n",
		id.User, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(id.user.PublicKey()))))
	b.WriteString("ssh_keys:\n  ed25519_private: |\n")
	for _, line := range strings.Split(strings.TrimSpace(id.hostPEM), "\n") {
		b.WriteString("    " + line + "\n")
	}
	fmt.Fprintf(&b, "  ed25519_public: %s\n", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(id.host))))
	return b.String()
}

// Dial logs in at addr (host:port), trying again until ctx ends: a guest's SSH answers only
// once cloud-init has installed the keys and sshd has started. The last error is returned.
func (id *Identity) Dial(ctx context.Context, addr string) (*ssh.Client, error) {
	config := &ssh.ClientConfig{
		User:            id.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(id.user)},
		HostKeyCallback: ssh.FixedHostKey(id.host),
		// Only the key's own type: a guest whose sshd also has keys of other types (made by
		// cloud-init's ssh module when the host key came some other way than ssh_keys) would
		// otherwise offer one of those, which the fixed key never matches.
		HostKeyAlgorithms: []string{id.host.Type()},
		Timeout:           10 * time.Second,
	}
	var last error
	for {
		c, err := ssh.Dial("tcp", addr, config)
		if err == nil {
			return c, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ssh %s@%s: %w (last attempt: %v)", id.User, addr, ctx.Err(), last)
		case <-time.After(2 * time.Second):
		}
	}
}

// Run runs command in a session of c and returns its output (stdout then stderr) and its
// error; a non-zero exit is an *ssh.ExitError.
func Run(c *ssh.Client, command string) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	// One buffer each: the session copies the two streams in two goroutines, and two
	// concurrent bytes.Buffer.ReadFrom calls on one buffer lose what the other wrote (the
	// stream that ends last truncates the buffer to its own length: sshd's empty stderr
	// wiped every command's output).
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	err = s.Run(command)
	return stdout.String() + stderr.String(), err
}

// AuthorizedKey is the user's public key, as an authorized_keys line.
func (id *Identity) AuthorizedKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(id.user.PublicKey())))
}

// HostKey is the host's private key (PEM) and public key (an authorized_keys line), for
// first-boot configurations other than CloudConfig's to install.
func (id *Identity) HostKey() (private, public string) {
	return id.hostPEM, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(id.host)))
}
