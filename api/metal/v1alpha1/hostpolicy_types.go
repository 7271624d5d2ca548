package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostPolicySpec says which tenant namespaces may have which Hosts of the policy's
// namespace. A Host no HostPolicy covers is given to no tenant.
type HostPolicySpec struct {
	// HostSelector picks the Hosts of this namespace the policy covers; empty covers all.
	// +optional
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`
	// Namespaces allowed by name.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelector allows namespaces whose labels match.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// HostPolicy lets tenant namespaces (by name or label) use Hosts of its namespace. A
// namespace may use a Host when any policy covering the Host allows it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hpol
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostPolicySpec `json:"spec,omitempty"`
}

// HostPolicyList is a list of HostPolicies.
// +kubebuilder:object:root=true
type HostPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HostPolicy{}, &HostPolicyList{})
}
