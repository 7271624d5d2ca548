package fake

import (
	"path/filepath"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// FuzzMRI sends requests of fuzzed bytes to the fake runtime through its gRPC server
// (conformance.Fuzz): the pool of the conformance suite, with its state file, so every
// change is also written and read as a restart would.
func FuzzMRI(f *testing.F) {
	dir := f.TempDir()
	cfg := Config{
		Name:          "fuzz",
		Allocatable:   &mriv1alpha1.Resources{MilliCpu: 64000, MemoryBytes: 128 << 30, Extended: map[string]int64{"example.com/gpu": 2}},
		Architectures: []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
		Images: map[string][]mriv1alpha1.Architecture{
			osImage.Digest:      nil,
			armOnlyImage.Digest: {mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
		},
		StateFile: filepath.Join(dir, "state.json"),
	}
	s := conformance.Serve(f, "unix://"+filepath.Join(dir, "mri.sock"), func() (conformance.Runtime, error) { return New(cfg) })
	conformance.Fuzz(f, conformance.FuzzTarget{Served: s, Spec: spec, Timeout: 10 * time.Second})
}
