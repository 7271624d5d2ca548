package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineClass is a size of machine: the resources a Machine of this class receives, and
// optionally the one architecture it is offered on. It is cluster-scoped and, like a
// StorageClass, has no spec/status split: it is a definition, not something reconciled.
//
// Capabilities are immutable because pools and the scheduler account bound Machines by
// their class; changing a class under running Machines would silently change that count.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=mclass
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.capabilities.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.capabilities.memory`
// +kubebuilder:printcolumn:name="Architecture",type=string,JSONPath=`.architecture`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS label: lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit"
type MachineClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Capabilities are the resources one Machine of this class is given: cpu and memory
	// (both required, both positive) and any extended resources named with a domain
	// prefix, such as nvidia.com/gpu. At most 12, which keeps the CEL checks within the
	// apiserver's cost budget.
	// +required
	// +kubebuilder:validation:XValidation:rule="'cpu' in self && 'memory' in self",message="capabilities must set both cpu and memory"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory' || k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?[.])+[a-z]{2,}/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="capability names are cpu, memory, or an extended resource with a domain prefix such as nvidia.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.all(k, quantity(string(self[k])).isGreaterThan(quantity('0')))",message="every capability must be a positive quantity (for example cpu: \"2\", memory: 4Gi)"
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=12
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="capabilities are immutable: create a new MachineClass instead"
	Capabilities corev1.ResourceList `json:"capabilities"`

	// Architecture, when set, limits this class to pools of that architecture. Empty means
	// the class is offered on every architecture.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="architecture is immutable: create a new MachineClass instead"
	Architecture Architecture `json:"architecture,omitempty"`
}

// MachineClassList is a list of MachineClasses.
// +kubebuilder:object:root=true
type MachineClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineClass{}, &MachineClassList{})
}
