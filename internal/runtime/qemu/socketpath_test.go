package qemu

import (
	"strings"
	"testing"
)

// TestConsoleSocketFitsWhereQMPsDoes: no machine socket's path is longer than the QMP
// socket's, so a state directory QEMU's QMP socket fits in is one the runtime accepts (a
// longer console socket name once made anvil dev refuse the state directory of a clone
// under /tmp/anvil-fresh.XXXXXX/anvil).
func TestConsoleSocketFitsWhereQMPsDoes(t *testing.T) {
	id := "dev-qemu-amd64-000000000000"
	if c, q := len(consoleSocketPath("/s", id)), len(qmpSocketPath("/s", id)); c > q {
		t.Fatalf("the console socket's path is %d bytes where the QMP socket's is %d", c, q)
	}
	// A state directory whose QMP socket path is exactly the limit: the console's fits.
	state := "/" + strings.Repeat("d", maxSocketPath-len(qmpSocketPath("/", id))-1)
	if n := len(qmpSocketPath(state, id)); n != maxSocketPath {
		t.Fatalf("test setup: QMP socket path %d bytes, want %d", n, maxSocketPath)
	}
	if n := len(consoleSocketPath(state, id)); n > maxSocketPath {
		t.Fatalf("console socket path %d bytes in a state directory the QMP socket fits in", n)
	}
}
