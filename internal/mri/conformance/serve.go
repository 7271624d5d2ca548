package conformance

import (
	"context"
	"io"
	"testing"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Runtime is a runtime the suite can serve: Close stops it, leaving its state for the
// next one to start on.
type Runtime interface {
	mriv1alpha1.MachineRuntimeServer
	Close()
}

// Served is a runtime behind a real unix socket, restartable on the same state. Its
// Start and Restart go into a Target.
type Served struct {
	endpoint string
	start    func() (Runtime, error)

	rt   Runtime
	stop context.CancelFunc
	done chan error
	// conns are closed only when the test ends: a restart in one subtest hands its client
	// to the next ones.
	conns []io.Closer
}

// Serve returns a Served that serves the runtimes start makes on endpoint, one at a
// time. When t ends, the runtime serving then is stopped and every client closed.
func Serve(t testing.TB, endpoint string, start func() (Runtime, error)) *Served {
	s := &Served{endpoint: endpoint, start: start}
	t.Cleanup(func() {
		if err := s.halt(); err != nil {
			t.Errorf("serving: %v", err)
		}
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// Start starts a runtime and returns a client for it.
func (s *Served) Start(t *testing.T) mriv1alpha1.MachineRuntimeClient {
	t.Helper()
	return s.serve(t)
}

// serve is Start for any test, a fuzz test's set-up among them.
func (s *Served) serve(t testing.TB) mriv1alpha1.MachineRuntimeClient {
	t.Helper()
	rt, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	l, err := mri.Listen(s.endpoint)
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.rt, s.stop, s.done = rt, cancel, make(chan error, 1)
	go func() { s.done <- mri.ServeListener(ctx, l, rt) }()
	c, conn, err := mri.Dial(s.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	s.conns = append(s.conns, conn)
	return c
}

// Restart stops the runtime and starts another on the same state.
func (s *Served) Restart(t *testing.T) mriv1alpha1.MachineRuntimeClient {
	t.Helper()
	if err := s.halt(); err != nil {
		t.Fatalf("serving: %v", err)
	}
	return s.Start(t)
}

// halt stops serving and closes the runtime; without one serving it does nothing.
func (s *Served) halt() error {
	if s.rt == nil {
		return nil
	}
	s.stop()
	s.rt.Close()
	err := <-s.done
	s.rt, s.stop, s.done = nil, nil, nil
	return err
}
