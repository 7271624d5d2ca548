package qemu

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// served is a runtime behind a real unix socket, restartable on the same state.
type served struct {
	cfg      Config
	endpoint string
	rt       *Runtime
	stop     context.CancelFunc
	done     chan error
	conns    []io.Closer
}

func (s *served) start(t *testing.T) mriv1alpha1.MachineRuntimeClient {
	t.Helper()
	rt, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mri.Listen(s.endpoint)
	if err != nil {
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

// halt stops the runtime, not its VMs.
func (s *served) halt(t *testing.T) {
	s.stop()
	s.rt.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("serving: %v", err)
	}
}

func (s *served) close(t *testing.T) {
	s.halt(t)
	for _, c := range s.conns {
		c.Close()
	}
}

// TestConformance boots the test OS under QEMU for every case of the MRI suite. The pool
// offers amd64 only, so the suite's wrong-architecture case has one to refuse.
func TestConformance(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	s := &served{cfg: cfg, endpoint: "unix://" + filepath.Join(t.TempDir(), "mri.sock")}
	start := time.Now()
	conformance.Run(t, conformance.Target{
		Start:   s.start,
		Restart: func(t *testing.T) mriv1alpha1.MachineRuntimeClient { s.halt(t); return s.start(t) },
		Spec:    func() *mriv1alpha1.MachineSpec { return machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64) },
		Timeout: 120 * time.Second,
	})
	t.Logf("conformance suite took %s", time.Since(start).Round(time.Second))
	s.close(t)
}
