package qemu

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// TestConformance boots the test OS under QEMU for every case of the MRI suite. The pool
// offers amd64 only, so the suite's wrong-architecture case has one to refuse, and an
// arm64-only image has no entry for the pool's machines.
func TestConformance(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	armOnly := pushTestOS(t, computev1alpha1.ArchitectureARM64)
	other := pushTestOSVariant(t, "other", computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	s := conformance.Serve(t, "unix://"+filepath.Join(t.TempDir(), "mri.sock"), func() (conformance.Runtime, error) { return New(cfg) })
	start := time.Now()
	conformance.Run(t, conformance.Target{
		Start:          s.Start,
		Restart:        s.Restart,
		Spec:           func() *mriv1alpha1.MachineSpec { return machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64) },
		Timeout:        120 * time.Second,
		MissingImage:   &mriv1alpha1.Image{Reference: img.Reference, Digest: "sha256:" + strings.Repeat("0123456789abcdef", 4)},
		WrongArchImage: &mriv1alpha1.Image{Reference: armOnly.Reference, Digest: armOnly.Digest},
		OtherImage:     &mriv1alpha1.Image{Reference: other.Reference, Digest: other.Digest},
		// The test OS's ready line comes once its first boot is done; its console's
		// terminal echoes what is typed from then on.
		Console: &conformance.ConsoleTarget{Booted: func(log []byte) bool { return bytes.Contains(log, []byte("ANVIL-TESTOS-READY")) }},
	})
	t.Logf("conformance suite took %s", time.Since(start).Round(time.Second))
}
