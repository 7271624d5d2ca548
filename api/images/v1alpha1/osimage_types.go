package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// OSImageSpec is a recipe: a base OS image and the steps that customise it, built for every
// architecture it names (or the fleet has) and published as one image index.
type OSImageSpec struct {
	// Base is the OCI reference of an anvil OS image index (tag or digest). Each
	// architecture's build starts from the base's entry of that architecture.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Base string `json:"base"`

	// Containerfiles are the build steps. The one without an architecture applies to every
	// architecture; one with an architecture is appended after it for that architecture's
	// build only. FROM is implicit (the base); ARG, ENV, RUN, COPY, WORKDIR and LABEL are
	// supported, with TARGETARCH, TARGETOS and TARGETPLATFORM predefined.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.filter(d, (has(d.architecture) ? d.architecture : '') == (has(c.architecture) ? c.architecture : '')).size() == 1)",message="containerfiles: at most one entry for all architectures and one per architecture"
	Containerfiles []Containerfile `json:"containerfiles"`

	// Context holds the files COPY reads, each from a ConfigMap or Secret key in the
	// OSImage's namespace, by the path COPY names it with.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=1024
	Context []ContextFile `json:"context,omitempty"`

	// KernelCommandLine replaces the base's kernel command line in the built images.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KernelCommandLine *string `json:"kernelCommandLine,omitempty"`

	// Output is where the index is published: pushed by digest, then the tag is moved.
	// +required
	Output OutputSpec `json:"output"`

	// PushSecretRef names a kubernetes.io/dockerconfigjson Secret for writing to the
	// output repository.
	// +optional
	PushSecretRef *computev1alpha1.LocalObjectReference `json:"pushSecretRef,omitempty"`

	// PullSecretRef names a kubernetes.io/dockerconfigjson Secret for reading the base.
	// +optional
	PullSecretRef *computev1alpha1.LocalObjectReference `json:"pullSecretRef,omitempty"`

	// Architectures to build. Empty means every architecture of the fleet's Ready
	// MachinePools; that set only grows (a pool going away removes nothing).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	Architectures []computev1alpha1.Architecture `json:"architectures,omitempty"`

	// Builder says where builds run.
	// +required
	Builder BuilderSpec `json:"builder"`

	// Publish says when the output tag moves.
	// +optional
	// +kubebuilder:default=AllArchitectures
	Publish PublishPolicy `json:"publish,omitempty"`

	// Rollout says how Machines booting the output tag move to a newly published index.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`
}

// RolloutSpec paces the reimaging of the Machines that boot the output tag (under
// imageUpdatePolicy Reimage) when a new index is published: a wave at a time, so that no
// MachinePool has more than maxUnavailable of them unavailable at once.
type RolloutSpec struct {
	// MaxUnavailable is how many of a MachinePool's Machines of this rollout may be
	// unavailable at once: a count (at least 1), or a percentage of the pool's Machines
	// ("10%", rounded down, but at least one Machine). Each pool has its own budget.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) != int || self >= 1",message="maxUnavailable: a count must be at least 1 (a rollout that may take no Machine down never moves); give 1 or more, or a percentage such as \"10%\""
	// +kubebuilder:validation:XValidation:rule="type(self) != string || self.matches('^[0-9]{1,3}%$')",message="maxUnavailable: a string must be a whole percentage such as \"10%\"; for a count, give a number without quotes"
	// +kubebuilder:validation:XValidation:rule="type(self) != string || !self.matches('^[0-9]{1,3}%$') || (int(self.replace('%', '')) >= 1 && int(self.replace('%', '')) <= 100)",message="maxUnavailable: a percentage must be from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Paused stops asking more Machines to reimage; those already asked finish.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// ProgressDeadlineSeconds is how long an asked Machine may take to run the new index
	// and be available again before the rollout stalls on it.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// Containerfile is the build steps for every architecture (no architecture) or for one.
type Containerfile struct {
	// Architecture the steps are for; empty means every architecture.
	// +optional
	Architecture computev1alpha1.Architecture `json:"architecture,omitempty"`
	// Content is the Containerfile text.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Content string `json:"content"`
}

// ContextFile is one file COPY can read: exactly one of a ConfigMap key or a Secret key.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="each context file sets exactly one of configMapKeyRef or secretKeyRef"
type ContextFile struct {
	// Path is the file's name in the build context, as COPY names it: relative, with no
	// '..' or '.' element.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^([^/]*[^./][^/]*|\.{3,})(/([^/]*[^./][^/]*|\.{3,}))*$`
	Path string `json:"path"`
	// ConfigMapKeyRef is a key of a ConfigMap in the OSImage's namespace.
	// +optional
	ConfigMapKeyRef *KeyReference `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef is a key of a Secret in the OSImage's namespace.
	// +optional
	SecretKeyRef *KeyReference `json:"secretKeyRef,omitempty"`
}

// KeyReference names one key of a ConfigMap or Secret in the same namespace.
type KeyReference struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// OutputSpec is a repository and the tag that names the published index.
type OutputSpec struct {
	// Repository, for example registry.example:5000/team-a/os. On the builders' registry
	// it must lie under the OSImage's namespace (registry/NAMESPACE/...): builders get a
	// credential that writes to it alone, and the manager publishes there.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="output.repository names a repository without a tag or digest: put the tag in output.tag"
	Repository string `json:"repository"`
	// Tag moved to the index once it is complete.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`
	Tag string `json:"tag"`
}

// BuilderSpec chooses the builder Machines.
type BuilderSpec struct {
	// MachineClassRef is the class of every builder Machine.
	// +required
	MachineClassRef computev1alpha1.MachineClassReference `json:"machineClassRef"`
	// MachinePoolSelector restricts builders to pools with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	MachinePoolSelector map[string]string `json:"machinePoolSelector,omitempty"`
	// Tolerations let builders onto tainted pools.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// AllowEmulated lets an architecture build on a pool that emulates it (QEMU TCG). By
	// default only pools that run the architecture natively build it.
	// +optional
	AllowEmulated bool `json:"allowEmulated,omitempty"`
	// Timeout of one architecture's build attempt, from its builder Machine's creation: at
	// most 6h, since the build's registry credential must outlive its attempts and may
	// live only so long.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('6h')",message="builder.timeout: at most 6h per attempt (a build's registry credential lives 48h at most); give a shorter timeout such as 2h, and retries for attempts that fail outside the recipe"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Retries of a failed or timed-out attempt before the architecture fails. A failing
	// build step is not retried: it would fail again.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Retries *int32 `json:"retries,omitempty"`
	// KeepFailed keeps a failed attempt's builder Machine for inspection.
	// +optional
	KeepFailed bool `json:"keepFailed,omitempty"`
}

// PublishPolicy says when the output tag moves.
// +kubebuilder:validation:Enum=AllArchitectures;CarryForward
type PublishPolicy string

const (
	// PublishAllArchitectures moves the tag only when every architecture succeeded.
	PublishAllArchitectures PublishPolicy = "AllArchitectures"
	// PublishCarryForward moves the tag with a failed architecture's previous entry kept;
	// the OSImage is Degraded and names it.
	PublishCarryForward PublishPolicy = "CarryForward"
)

// OSImageStatus is what anvil has built and published.
type OSImageStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Building, Degraded, RollingOut.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Architectures this OSImage builds for: spec.architectures, or every architecture the
	// fleet has had since the OSImage was created.
	// +optional
	// +listType=set
	Architectures []computev1alpha1.Architecture `json:"architectures,omitempty"`
	// LatestBuild names the OSImageBuild of the current inputs.
	// +optional
	LatestBuild string `json:"latestBuild,omitempty"`
	// Index is the digest of the index the output tag names.
	// +optional
	Index string `json:"index,omitempty"`
	// Published lists the entries of that index, one per architecture.
	// +optional
	// +listType=map
	// +listMapKey=architecture
	Published []PublishedEntry `json:"published,omitempty"`
	// Rollout counts the Machines booting the output tag by how far they are in moving to
	// the published index. Absent before the first publication.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// RolloutStatus is the progress of the Machines booting the output tag towards Target.
type RolloutStatus struct {
	// Target is the index digest the Machines are moving to (status.index).
	Target string `json:"target"`
	// Machines of the rollout: those bound to a pool whose spec.image names the output tag,
	// under imageUpdatePolicy Reimage.
	Machines int32 `json:"machines"`
	// Updated run their architecture's entry of Target and are available.
	Updated int32 `json:"updated"`
	// Updating were asked to reimage to Target and are not back yet.
	Updating int32 `json:"updating"`
	// Pending were not asked yet.
	Pending int32 `json:"pending"`
}

// PublishedEntry is one architecture's image in the published index.
type PublishedEntry struct {
	Architecture computev1alpha1.Architecture `json:"architecture"`
	// Digest of the architecture's image manifest.
	Digest string `json:"digest"`
	// InputHash of the inputs it was built from.
	InputHash string `json:"inputHash"`
	// Build is the OSImageBuild that built or reused it.
	// +optional
	Build string `json:"build,omitempty"`
}

// OSImage is a recipe for a multi-architecture OS image.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osi
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Building",type=string,JSONPath=`.status.conditions[?(@.type=="Building")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Architectures",type=string,JSONPath=`.status.architectures`
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latestBuild`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.conditions[?(@.type=="RollingOut")].reason`
// +kubebuilder:printcolumn:name="Index",type=string,JSONPath=`.status.index`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OSImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OSImageSpec   `json:"spec"`
	Status OSImageStatus `json:"status,omitempty"`
}

// OSImageList is a list of OSImages.
// +kubebuilder:object:root=true
type OSImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OSImage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OSImage{}, &OSImageList{})
}
