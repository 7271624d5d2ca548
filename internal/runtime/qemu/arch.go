package qemu

import (
	"fmt"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// qemuArchNames are QEMU's (and uname's) names of the architectures, beside anvil's.
var qemuArchNames = map[string]computev1alpha1.Architecture{
	"x86_64":  computev1alpha1.ArchitectureAMD64,
	"aarch64": computev1alpha1.ArchitectureARM64,
}

// ParseArchitectures reads architectures by anvil's names (amd64, arm64) or QEMU's
// (x86_64, aarch64), dropping repeats.
func ParseArchitectures(names []string) ([]computev1alpha1.Architecture, error) {
	var out []computev1alpha1.Architecture
	seen := map[computev1alpha1.Architecture]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		a, ok := qemuArchNames[n]
		if !ok {
			a = computev1alpha1.Architecture(n)
		}
		if mri.ArchToMRI(a) == mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED {
			return nil, fmt.Errorf("architecture %q: use amd64 (x86_64) or arm64 (aarch64)", n)
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}
