package fake

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// The images of the conformance pool: the spec's, another, one of arm64 only, and one it
// lacks.
var (
	osImage      = &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:" + strings.Repeat("0", 64)}
	armOnlyImage = &mriv1alpha1.Image{Reference: "registry.example/os-arm:1", Digest: "sha256:" + strings.Repeat("1", 64)}
	missingImage = &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:" + strings.Repeat("2", 64)}
	otherImage   = &mriv1alpha1.Image{Reference: "registry.example/os:2", Digest: "sha256:" + strings.Repeat("3", 64)}
)

func spec() *mriv1alpha1.MachineSpec {
	return &mriv1alpha1.MachineSpec{
		Class:             "small",
		Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 1 << 30},
		Image:             &mriv1alpha1.Image{Reference: osImage.Reference, Digest: osImage.Digest},
		Architecture:      mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Power:             mriv1alpha1.Power_POWER_ON,
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default"}},
	}
}

func runConformance(t *testing.T, latency, jitter time.Duration) {
	dir := t.TempDir()
	cfg := Config{
		Name:          "conformance",
		Allocatable:   &mriv1alpha1.Resources{MilliCpu: 64000, MemoryBytes: 128 << 30},
		Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
		Images: map[string][]mriv1alpha1.Architecture{
			osImage.Digest:      nil, // its index does not say
			armOnlyImage.Digest: {mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
			otherImage.Digest:   {mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
		},
		Latency:   latency,
		Jitter:    jitter,
		StateFile: filepath.Join(dir, "state.json"),
	}
	s := conformance.Serve(t, "unix://"+filepath.Join(dir, "mri.sock"), func() (conformance.Runtime, error) { return New(cfg) })
	conformance.Run(t, conformance.Target{Start: s.Start, Restart: s.Restart, Spec: spec, Timeout: 10 * time.Second,
		MissingImage: missingImage, WrongArchImage: armOnlyImage, OtherImage: otherImage,
		Console: &conformance.ConsoleTarget{Booted: func(log []byte) bool { return bytes.Contains(log, []byte(": running\n")) }}})
}

func TestConformanceInstant(t *testing.T) { runConformance(t, 0, 0) }
func TestConformanceWithLatency(t *testing.T) {
	runConformance(t, 20*time.Millisecond, 30*time.Millisecond)
}
