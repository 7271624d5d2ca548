package fake

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// served is a fake runtime behind a real unix socket, restartable on the same state.
type served struct {
	cfg      Config
	endpoint string
	rt       *Runtime
	stop     context.CancelFunc
	done     chan error
	// conns are closed when the whole suite ends: a restart in one subtest hands its
	// client to the next ones.
	conns []io.Closer
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

func (s *served) halt(t *testing.T) {
	s.stop()
	s.rt.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("serving: %v", err)
	}
}

func spec() *mriv1alpha1.MachineSpec {
	return &mriv1alpha1.MachineSpec{
		Class:             "small",
		Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
		Image:             &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000"},
		Architecture:      mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Power:             mriv1alpha1.Power_POWER_ON,
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default"}},
	}
}

func runConformance(t *testing.T, latency, jitter time.Duration) {
	dir := t.TempDir()
	s := &served{
		cfg: Config{
			Name:          "conformance",
			Allocatable:   &mriv1alpha1.Resources{MilliCpu: 64000, MemoryBytes: 128 << 30},
			Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
			Latency:       latency, Jitter: jitter,
			StateFile: filepath.Join(dir, "state.json"),
		},
		endpoint: "unix://" + filepath.Join(dir, "mri.sock"),
	}
	conformance.Run(t, conformance.Target{
		Start:   s.start,
		Restart: func(t *testing.T) mriv1alpha1.MachineRuntimeClient { s.halt(t); return s.start(t) },
		Spec:    spec,
		Timeout: 10 * time.Second,
	})
	s.halt(t)
	for _, c := range s.conns {
		c.Close()
	}
}

func TestConformanceInstant(t *testing.T) { runConformance(t, 0, 0) }
func TestConformanceWithLatency(t *testing.T) {
	runConformance(t, 20*time.Millisecond, 30*time.Millisecond)
}
