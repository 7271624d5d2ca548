package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// AnvilMachineTemplateSpec holds the template Cluster API copies into each AnvilMachine.
type AnvilMachineTemplateSpec struct {
	// +required
	Template AnvilMachineTemplateResource `json:"template"`
}

// AnvilMachineTemplateResource is the metadata and spec of the AnvilMachines made from it.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.providerID)",message="spec.template.spec.providerID must be empty: the provider sets each AnvilMachine's own"
type AnvilMachineTemplateResource struct {
	// Metadata is copied into each AnvilMachine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec AnvilMachineSpec `json:"spec"`
}

// AnvilMachineTemplate is the AnvilMachine of every Machine of a MachineDeployment,
// MachineSet or control plane. Templates are not edited: a change is a new template that the
// MachineDeployment is pointed at, and Cluster API rolls out (or, for a new image with the
// InPlaceUpdates gate, updates in place).
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvilmachinetemplates,shortName=amt,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="an AnvilMachineTemplate's spec cannot be changed: create a new template and point the MachineDeployment at it, and Cluster API rolls the change out"
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.template.spec.machineClassRef.name`
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.template.spec.architecture`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnvilMachineTemplateSpec `json:"spec"`
}

// AnvilMachineTemplateList is a list of AnvilMachineTemplates.
// +kubebuilder:object:root=true
type AnvilMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilMachineTemplate{}, &AnvilMachineTemplateList{})
}
