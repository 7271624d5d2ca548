// Package ironictest runs real Ironics (internal/ironic) for tests: one for a single test
// (Start), or one a test package's tests take turns on (Shared), since each start costs
// 10–15 s. It is a test fixture, not part of anvil. A missing Ironic fails the test, naming
// the fix; it never skips.
package ironictest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/ironic"
)

// Username and Password are the API credentials of every Ironic this package starts.
const (
	Username = "anvil"
	Password = "ironic-test-password-0123456789"
)

// config is the default configuration: fake hardware, no cleaning, Ironic's own limits.
func config(stateDir string) ironic.Config {
	return ironic.Config{StateDir: stateDir, Username: Username, Password: Password, HealthInterval: time.Second}
}

// Start runs an Ironic for one test, stopped when the test ends; mod, when set, adjusts
// its configuration. For tests whose subject is Ironic itself (its start, restart, the loss
// of its database) or that need another configuration than Shared's.
func Start(t testing.TB, mod func(*ironic.Config)) *ironic.Ironic {
	t.Helper()
	cfg := config(t.TempDir())
	if mod != nil {
		mod(&cfg)
	}
	irc := start(t, cfg)
	t.Cleanup(irc.Stop)
	LogOnFailure(t, irc)
	return irc
}

func start(t testing.TB, cfg ironic.Config) *ironic.Ironic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	irc, err := ironic.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting Ironic: %v", err)
	}
	t.Logf("Ironic up in %s", time.Since(began).Round(time.Millisecond))
	return irc
}

// Shared is one Ironic with the default configuration for the tests of a package that
// merely need an Ironic. It starts on first use; the package's TestMain stops it after
// the tests. The tests take turns on it, never in parallel: each registers nodes of its
// own, and when it ends every node is removed, so it leaves nothing that changes the
// next test's outcome.
type Shared struct {
	once sync.Once
	dir  string
	irc  *ironic.Ironic
	err  error
}

// Ironic starts the shared Ironic if it is not running yet and returns it; when the test
// ends, every node it then holds is removed (a failure to remove one fails the test).
func (s *Shared) Ironic(t testing.TB) *ironic.Ironic {
	t.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "anvil-ironic-"); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		began := time.Now()
		if s.irc, s.err = ironic.Start(ctx, config(s.dir)); s.err == nil {
			t.Logf("Ironic up in %s (shared by the package's tests)", time.Since(began).Round(time.Millisecond))
		}
	})
	if s.err != nil {
		t.Fatalf("starting the shared Ironic: %v", s.err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := removeNodes(ctx, s.irc); err != nil {
			t.Errorf("removing the test's nodes from the shared Ironic: %v", err)
		}
	})
	LogOnFailure(t, s.irc)
	return s.irc
}

// Stop stops the shared Ironic, if it started, and removes its files.
func (s *Shared) Stop() {
	if s.irc != nil {
		s.irc.Stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// LogOnFailure shows the end of irc's ironic.log when the test fails.
func LogOnFailure(t testing.TB, irc *ironic.Ironic) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ironic.log ends with:\n%s", Tail(irc.LogPath(), 40))
		}
	})
}

// Tail is the last n lines of the file at path, or why it cannot be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
