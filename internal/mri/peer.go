package mri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"google.golang.org/grpc/credentials"
)

// An MRI socket carries first-boot Secrets one way and claims on servers for any
// namespace the other, so both ends check who is at the other end (SO_PEERCRED): a user
// who squats the socket path, or dials a socket they should not reach, is refused at the
// handshake. The socket's folder must be writable by its owner alone, or anyone could put
// their own socket in its place.

// Option changes how Dial and ServeListener check their peer (and what a server records).
type Option func(*options)

type options struct {
	uids []uint32
	// pool is the MachinePool this end is for (rule I5): a server announces it to every
	// client as the connection opens; a client refuses a server announcing another.
	pool string
	// journal is the path of a create journal (CreateJournal); servers only.
	journal string
}

// AllowPeers lets processes of these user ids be the other end too; the process's own
// uid is always allowed (a poollet and its runtime usually run as one user).
func AllowPeers(uids ...uint32) Option {
	return func(o *options) { o.uids = append(o.uids, uids...) }
}

// OnlyPeers replaces the allowed user ids, the process's own included; tests use it to
// show that a peer not on the list is refused.
func OnlyPeers(uids ...uint32) Option {
	return func(o *options) { o.uids = slices.Clone(uids) }
}

// Pool names the MachinePool this end is for (rule I5). ServeListener announces it on
// every connection as it opens; Dial refuses, on every connection, a runtime that
// announces another. A poollet started with a mistyped --pool, or a second poollet on
// another pool's socket, would otherwise read that pool's machines as its own garbage.
func Pool(name string) Option {
	return func(o *options) { o.pool = name }
}

func optionsOf(opts []Option) options {
	o := options{uids: []uint32{uint32(os.Getuid())}}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// peerCheck is gRPC transport credentials for unix sockets that admit only the peers
// whose uid is listed. It adds no encryption: the kernel carries the bytes.
type peerCheck struct {
	uids []uint32
	pool string
}

func newPeerCheck(o options) *peerCheck { return &peerCheck{uids: o.uids, pool: o.pool} }

// ErrPeerRefused means the process at the other end of the socket runs as a user the
// check does not allow.
var ErrPeerRefused = errors.New("MRI peer refused")

// PeerInfo is what the handshake learnt of the other end.
type PeerInfo struct {
	credentials.CommonAuthInfo
	UID uint32
	PID int32
}

// AuthType names the check.
func (PeerInfo) AuthType() string { return "unix-peercred" }

func (p *peerCheck) check(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: not a unix socket (%T)", ErrPeerRefused, conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		credErr = err
	}
	if credErr != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: reading the peer's credentials: %v", ErrPeerRefused, credErr)
	}
	if !slices.Contains(p.uids, cred.Uid) {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: process %d runs as uid %d; allowed: %v", ErrPeerRefused, cred.Pid, cred.Uid, p.uids)
	}
	return conn, PeerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		UID: cred.Uid, PID: cred.Pid}, nil
}

func (p *peerCheck) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := p.check(conn)
	if err != nil {
		return nil, nil, err
	}
	pool, err := readHello(c)
	if err == nil && p.pool != "" && pool != p.pool {
		err = fmt.Errorf("%w: it serves pool %s, this client is for pool %s; check the poollet's --pool and --runtime (MRI rule I5)", ErrWrongPool, pool, p.pool)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, info, nil
}

func (p *peerCheck) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := p.check(conn)
	if err != nil {
		return nil, nil, err
	}
	if err := writeHello(c, p.pool); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, info, nil
}

func (p *peerCheck) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (p *peerCheck) Clone() credentials.TransportCredentials {
	return &peerCheck{uids: slices.Clone(p.uids), pool: p.pool}
}

func (p *peerCheck) OverrideServerName(string) error { return nil }

// checkSocketDir refuses a socket folder that someone else could write to: another user
// owning it, or group or world write permission (such as /tmp's).
func checkSocketDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	owner := uint32(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = st.Uid
	}
	return socketDirProblem(dir, fi.IsDir(), owner, uint32(os.Getuid()), fi.Mode().Perm())
}

// socketDirProblem says what is wrong with a socket folder owned by owner with permissions
// perm, for a process running as self; nil when only self (or root) can write to it.
func socketDirProblem(dir string, isDir bool, owner, self uint32, perm fs.FileMode) error {
	switch {
	case !isDir:
		return fmt.Errorf("socket folder %s is not a folder", dir)
	case owner != self && owner != 0:
		return fmt.Errorf("socket folder %s belongs to uid %d: its owner could replace the socket; use a folder of your own (the default is %s)", dir, owner, DefaultSocketDir)
	case perm&0o022 != 0:
		return fmt.Errorf("socket folder %s is writable by others (%v): anyone could replace the socket; use a folder only its owner writes (the default is %s)", dir, perm, DefaultSocketDir)
	}
	return nil
}

// DefaultSocketDir is where runtimes' sockets are by default.
const DefaultSocketDir = "/run/anvil"

// DefaultEndpoint is the default endpoint of a runtime named name.
func DefaultEndpoint(name string) string {
	return "unix://" + filepath.Join(DefaultSocketDir, name+".sock")
}
