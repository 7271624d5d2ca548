package ironic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// shared is the Ironic of the tests that merely need one, each leaving it without
// nodes; TestMain stops it. A test keeps its own (ironictest.Start) when its subject is
// Ironic itself or its configuration:
//   - TestAdoptAfterDatabaseLoss kills Ironic and deletes its database;
//   - TestIronicLimitIsBusy, TestStartingHookRunsOnlyWhenTheDeploymentStarts and
//     TestTwentyNodesAtLimitFive need Ironic's own deploy limit (max_concurrent_deploy) and
//     slow fake deployments, and count what Ironic deploys at once.
//
// The tests of an unavailable Ironic share it behind a failing proxy of their own (flaky).
var shared ironictest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// logBuffer collects the provisioner's log lines, to check no secret is in them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintln(&l.b, prefix, args)
	}, funcr.Options{Verbosity: 9})
}

func newProvisioner(t *testing.T, irc *ironic.Ironic, mod func(*Options)) (*Provisioner, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o := Options{Endpoint: irc.Endpoint(), Username: ironictest.Username, Password: ironictest.Password, Logger: logs.logger()}
	if mod != nil {
		mod(&o)
	}
	p, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p, logs
}

// waitFor polls Get until cond holds, failing after timeout.
func waitFor(t *testing.T, p *Provisioner, name string, timeout time.Duration, what string, cond func(provisioner.Node) bool) provisioner.Node {
	t.Helper()
	n, err := pollFor(p, name, timeout, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pollFor is waitFor for other goroutines than the test's.
func pollFor(p *Provisioner, name string, timeout time.Duration, what string, cond func(provisioner.Node) bool) (provisioner.Node, error) {
	deadline := time.Now().Add(timeout)
	var last provisioner.Node
	var lastErr error
	for time.Now().Before(deadline) {
		n, err := p.Get(context.Background(), name)
		if err == nil && cond(n) {
			return n, nil
		}
		last, lastErr = n, err
		time.Sleep(250 * time.Millisecond)
	}
	return last, fmt.Errorf("node %s not %s within %s: last %+v, %v", name, what, timeout, last, lastErr)
}

func idleIn(want provisioner.State) func(provisioner.Node) bool {
	return func(n provisioner.Node) bool { return n.State == want && !n.Busy }
}

func waitState(t *testing.T, p *Provisioner, name string, want provisioner.State) provisioner.Node {
	t.Helper()
	return waitFor(t, p, name, 60*time.Second, string(want), idleIn(want))
}

// availableNodes registers fake nodes of names and provides them: Available.
func availableNodes(t *testing.T, p *Provisioner, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range names {
		if _, err := p.Register(ctx, fakeHost(n)); err != nil {
			t.Fatal(err)
		}
		waitState(t, p, n, provisioner.StateManageable)
		retryBusy(t, "Provide", func() error { return p.Provide(ctx, n) })
		waitState(t, p, n, provisioner.StateAvailable)
	}
}

// twice calls f two times: every operation must be idempotent.
func twice(t *testing.T, what string, f func() error) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if err := f(); err != nil {
			t.Fatalf("%s (call %d): %v", what, i+1, err)
		}
	}
}

// retryBusy calls f until it stops answering ErrBusy.
func retryBusy(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := untilNotBusy(f); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func untilNotBusy(f func() error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := f()
		if !errors.Is(err, provisioner.ErrBusy) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func fakeHost(name string) provisioner.Registration {
	return provisioner.Registration{Name: name, BMCAddress: "fake://" + name, BootMACAddress: macFor(name), Architecture: "amd64"}
}

func macFor(name string) string {
	var h uint32 = 2166136261
	for _, c := range []byte(name) {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(h>>16), byte(h>>8), byte(h))
}
