package mri

import (
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// architectures maps the API's architecture names to the MRI's enum, one table for the
// poollet and every runtime.
var architectures = map[computev1alpha1.Architecture]mriv1alpha1.Architecture{
	computev1alpha1.ArchitectureAMD64:   mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
	computev1alpha1.ArchitectureARM64:   mriv1alpha1.Architecture_ARCHITECTURE_ARM64,
	computev1alpha1.ArchitectureRISCV64: mriv1alpha1.Architecture_ARCHITECTURE_RISCV64,
	computev1alpha1.ArchitecturePPC64LE: mriv1alpha1.Architecture_ARCHITECTURE_PPC64LE,
	computev1alpha1.ArchitectureS390X:   mriv1alpha1.Architecture_ARCHITECTURE_S390X,
}

// ArchToMRI converts an API architecture; unknown ones become UNSPECIFIED, which every
// runtime refuses.
func ArchToMRI(a computev1alpha1.Architecture) mriv1alpha1.Architecture { return architectures[a] }

// ArchFromMRI converts back; UNSPECIFIED and unknown values become "".
func ArchFromMRI(a mriv1alpha1.Architecture) computev1alpha1.Architecture {
	for k, v := range architectures {
		if v == a {
			return k
		}
	}
	return ""
}
