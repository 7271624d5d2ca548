package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// OSImageBuildSpec is one set of an OSImage's inputs, fixed at creation. The steps, context
// and credentials of each architecture's job are in the build's job Secret, written with it.
// When the index is published follows the OSImage's publish policy as it is now: a policy
// is no input of the images.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an OSImageBuild records one set of inputs and cannot change: edit its OSImage instead"
type OSImageBuildSpec struct {
	// OSImage is the name of the OSImage (in the same namespace) this build is for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	OSImage string `json:"osImage"`
	// Base is the base index by digest, as it was resolved for this build.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Base string `json:"base"`
	// Output is where the index is published.
	// +required
	Output OutputSpec `json:"output"`
	// Architectures lists each architecture's inputs.
	// +required
	// +listType=map
	// +listMapKey=architecture
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	Architectures []ArchitectureInputs `json:"architectures"`
}

// ArchitectureInputs is what one architecture's image is built from, by digest.
type ArchitectureInputs struct {
	Architecture computev1alpha1.Architecture `json:"architecture"`
	// InputHash is the sha256 of every input of this architecture's build; the output
	// repository keeps a tag per architecture and hash, so a hash built once is reused.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	InputHash string `json:"inputHash"`
	// BaseDigest is the base index's entry for this architecture.
	BaseDigest string `json:"baseDigest"`
	// BuilderDigest is the builder image's entry for this architecture.
	BuilderDigest string `json:"builderDigest"`
}

// BuildPhase is how far one architecture's build has come.
// +kubebuilder:validation:Enum=Reused;Pending;Scheduling;Building;Succeeded;Failed
type BuildPhase string

const (
	// BuildPhaseReused: an image of the same input hash was in the output repository.
	BuildPhaseReused BuildPhase = "Reused"
	// BuildPhasePending: waiting for its builder Machine to be created.
	BuildPhasePending BuildPhase = "Pending"
	// BuildPhaseScheduling: the builder Machine exists and waits for a pool.
	BuildPhaseScheduling BuildPhase = "Scheduling"
	// BuildPhaseBuilding: the builder Machine runs the build.
	BuildPhaseBuilding BuildPhase = "Building"
	// BuildPhaseSucceeded: the image is pushed under its hash tag.
	BuildPhaseSucceeded BuildPhase = "Succeeded"
	// BuildPhaseFailed: every attempt failed; Reason, Message and LogTail say why.
	BuildPhaseFailed BuildPhase = "Failed"
)

// Done reports whether the phase is final.
func (p BuildPhase) Done() bool {
	return p == BuildPhaseReused || p == BuildPhaseSucceeded || p == BuildPhaseFailed
}

// ArchitectureBuildStatus is one architecture's build.
type ArchitectureBuildStatus struct {
	Architecture computev1alpha1.Architecture `json:"architecture"`
	Phase        BuildPhase                   `json:"phase"`
	// Machine is the builder Machine of the current or last attempt.
	// +optional
	Machine string `json:"machine,omitempty"`
	// Attempts started so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// StartTime of the first attempt.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime of the final phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Digest of the architecture's image manifest once built or reused.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Reason of a failure, as a CamelCase word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what failed: for a failing step, its line.
	// +optional
	Message string `json:"message,omitempty"`
	// LogTail is the last lines of the build log.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	LogTail string `json:"logTail,omitempty"`
}

// OSImageBuildStatus tracks each architecture of the build.
type OSImageBuildStatus struct {
	// Conditions: Building, Ready (the index of this build is published), Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Architectures, one entry each.
	// +optional
	// +listType=map
	// +listMapKey=architecture
	Architectures []ArchitectureBuildStatus `json:"architectures,omitempty"`
	// Index is the digest of the index this build published.
	// +optional
	Index string `json:"index,omitempty"`
	// Published lists that index's entries (a carried-forward one names its own build).
	// +optional
	// +listType=map
	// +listMapKey=architecture
	Published []PublishedEntry `json:"published,omitempty"`
	// Counts of architectures by phase, for kubectl's columns.
	// +optional
	Reused int32 `json:"reused,omitempty"`
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	Building int32 `json:"building,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// OSImageBuild is one immutable set of an OSImage's inputs and the builds that made it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osib
// +kubebuilder:printcolumn:name="OSImage",type=string,JSONPath=`.spec.osImage`
// +kubebuilder:printcolumn:name="Reused",type=integer,JSONPath=`.status.reused`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`
// +kubebuilder:printcolumn:name="Building",type=integer,JSONPath=`.status.building`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OSImageBuild struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OSImageBuildSpec   `json:"spec"`
	Status OSImageBuildStatus `json:"status,omitempty"`
}

// OSImageBuildList is a list of OSImageBuilds.
// +kubebuilder:object:root=true
type OSImageBuildList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OSImageBuild `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OSImageBuild{}, &OSImageBuildList{})
}
