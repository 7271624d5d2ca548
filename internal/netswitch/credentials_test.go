package netswitch

import (
	"bytes"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// nobody is the user the attacker's process runs as.
const nobody = 65534

// TestHelperSendsAsAnotherUser is not a test: a process of TestAFrameOfAnotherUserIsDropped
// runs it as another user, to bind a port's own path and send one frame from there.
func TestHelperSendsAsAnotherUser(t *testing.T) {
	peer, segment, frame := os.Getenv("NETSWITCH_HELPER_PEER"), os.Getenv("NETSWITCH_HELPER_SEGMENT"), os.Getenv("NETSWITCH_HELPER_FRAME")
	if peer == "" {
		return // run as a test on its own: nothing to do
	}
	raw, err := hex.DecodeString(frame)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: peer, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUnix(raw, &net.UnixAddr{Name: segment, Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
}

// A process of another user that sends from a port's own socket path (as one that binds
// that path in a mount namespace of its own would) is not that port: the kernel's
// credentials, not the path, say who sent. Here the path is simply one the other user may
// write, so that the sender path matches a port and only the credentials check stands in
// the way.
func TestAFrameOfAnotherUserIsDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: the attacker runs as another user")
	}
	root, err := os.MkdirTemp("", "nsw-cred")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	nics := filepath.Join(root, "nics")
	for dir, mode := range map[string]os.FileMode{root: 0o755, nics: 0o777} {
		if err := os.MkdirAll(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(filepath.Join(root, "sw"), testrLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := attachNIC(t, s, segA, nics, "a", macA, ipA)
	b := attachNIC(t, s, segA, nics, "b", macB, ipB)
	evil := filepath.Join(nics, "evil")
	if _, _, err := s.Attach(segA, Port{Peer: evil, MAC: net.HardwareAddr(macC[:]), IP: ipC}); err != nil {
		t.Fatal(err)
	}

	// The test binary, where the other user can run it.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(root, "helper")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	attack := payloadFrame(macA, macC, "another user as port c")
	cmd := exec.Command(helper, "-test.run=^TestHelperSendsAsAnotherUser$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NETSWITCH_HELPER_PEER="+evil, "NETSWITCH_HELPER_SEGMENT="+a.segment,
		"NETSWITCH_HELPER_FRAME="+hex.EncodeToString(attack))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other user's process: %v\n%s", err, out)
	}
	marker := payloadFrame(macA, macB, "marker")
	b.send(marker)
	if got := a.recv(); !bytes.Equal(got, marker) {
		t.Fatalf("a's first frame is %q, not the marker: the other user's frame got through", got)
	}
}
