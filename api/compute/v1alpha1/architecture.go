package v1alpha1

// Architecture is a CPU architecture, named as Go and the OCI image spec name it
// (GOARCH), so an image index entry's platform.architecture compares directly.
// +kubebuilder:validation:Enum=amd64;arm64;riscv64;ppc64le;s390x
type Architecture string

const (
	ArchitectureAMD64   Architecture = "amd64"
	ArchitectureARM64   Architecture = "arm64"
	ArchitectureRISCV64 Architecture = "riscv64"
	ArchitecturePPC64LE Architecture = "ppc64le"
	ArchitectureS390X   Architecture = "s390x"
)

// KnownArchitectures lists every Architecture the API accepts, in a fixed order.
var KnownArchitectures = []Architecture{
	ArchitectureAMD64, ArchitectureARM64, ArchitectureRISCV64, ArchitecturePPC64LE, ArchitectureS390X,
}

// IsKnown reports whether a is one of the architectures the API accepts.
func (a Architecture) IsKnown() bool {
	for _, k := range KnownArchitectures {
		if a == k {
			return true
		}
	}
	return false
}
