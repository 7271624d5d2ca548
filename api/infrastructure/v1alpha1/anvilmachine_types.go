package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// AnvilMachineSpec is the anvil Machine to make for one Cluster API Machine: its class,
// image and placement, with the compute API's own types and rules. The provider adds the
// rest: the first-boot config (the Machine's bootstrap data), power, the pool binding.
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.filter(v, has(v.image)).size() <= 1",message="at most one volume may be the root disk (image source)"
type AnvilMachineSpec struct {
	// ProviderID is anvil://<namespace>/<name> of the anvil Machine made for this
	// AnvilMachine. The provider sets it; once set it cannot change.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^anvil://[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="providerID must be anvil://<namespace>/<machine name>; the provider sets it, leave it empty"
	ProviderID string `json:"providerID,omitempty"`

	// MachineClassRef names the MachineClass, which sets the resources.
	// +required
	MachineClassRef computev1alpha1.MachineClassReference `json:"machineClassRef"`

	// Image is the OCI reference of the OS image; for a multi-arch index each machine boots
	// its architecture's entry. The one field an in-place update changes (by reimaging).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// RequiredImageAnnotations are what the image must say of itself (the anvil Machine's
	// field): a Kubernetes node's template asks for dev.anvil.kubernetes.version, so an image
	// without kubelet and kubeadm, or of another version, never boots as a node (Ready False,
	// ImageRequirementsUnmet).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	RequiredImageAnnotations map[string]string `json:"requiredImageAnnotations,omitempty"`

	// Architecture pins the CPU architecture. Empty means any architecture the image offers.
	// +optional
	Architecture computev1alpha1.Architecture `json:"architecture,omitempty"`

	// Emulation says whether the machine may run on a pool that emulates its architecture:
	// Allowed (the anvil Machine's default) or Forbidden.
	// +optional
	Emulation computev1alpha1.Emulation `json:"emulation,omitempty"`

	// MachinePoolSelector restricts the machine to pools with all these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	MachinePoolSelector map[string]string `json:"machinePoolSelector,omitempty"`

	// HostSelector restricts a bare-metal pool's choice of server to Hosts with matching labels.
	// +optional
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`

	// Tolerations let the machine onto pools with matching taints.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Volumes are the machine's disks.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=12
	Volumes []computev1alpha1.MachineVolume `json:"volumes,omitempty"`

	// NetworkInterfaces are the machine's NICs.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NetworkInterfaces []computev1alpha1.MachineNetworkInterface `json:"networkInterfaces,omitempty"`

	// DataTemplateRef names an AnvilDataTemplate in the AnvilMachine's namespace that renders
	// the anvil Machine's hostname and first-boot metadata.
	// +optional
	DataTemplateRef *DataTemplateReference `json:"dataTemplateRef,omitempty"`
}

// DataTemplateReference names an AnvilDataTemplate in the same namespace.
type DataTemplateReference struct {
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="dataTemplateRef.name must be an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// AnvilMachineStatus is what the provider observes of the anvil Machine.
type AnvilMachineStatus struct {
	// Initialization is what Cluster API waits for before it looks for the Node.
	// +optional
	Initialization AnvilMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// Addresses of the anvil Machine.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// FailureDomain is the failure domain of the pool the machine runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// Conditions: Ready, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// AnvilMachineInitializationStatus is the part of the status Cluster API's contract reads.
// +kubebuilder:validation:MinProperties=1
type AnvilMachineInitializationStatus struct {
	// Provisioned is true once the anvil Machine runs.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// AnvilMachine is the infrastructure of one Cluster API Machine: an anvil Machine, a VM or a
// server of any architecture. Only its image may change after creation (an in-place update
// reimages); anything else is a new AnvilMachineTemplate and a rollout.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvilmachines,shortName=am,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.providerID) || (has(self.spec.providerID) && self.spec.providerID == oldSelf.spec.providerID)",message="spec.providerID cannot be changed or removed once set: it names the anvil Machine of this AnvilMachine"
// +kubebuilder:validation:XValidation:rule="self.spec.machineClassRef == oldSelf.spec.machineClassRef",message="spec.machineClassRef cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.architecture) == has(oldSelf.spec.architecture) && (!has(self.spec.architecture) || self.spec.architecture == oldSelf.spec.architecture)",message="spec.architecture cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.emulation) == has(oldSelf.spec.emulation) && (!has(self.spec.emulation) || self.spec.emulation == oldSelf.spec.emulation)",message="spec.emulation cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.machinePoolSelector) == has(oldSelf.spec.machinePoolSelector) && (!has(self.spec.machinePoolSelector) || self.spec.machinePoolSelector == oldSelf.spec.machinePoolSelector)",message="spec.machinePoolSelector cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.hostSelector) == has(oldSelf.spec.hostSelector) && (!has(self.spec.hostSelector) || self.spec.hostSelector == oldSelf.spec.hostSelector)",message="spec.hostSelector cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.tolerations) == has(oldSelf.spec.tolerations) && (!has(self.spec.tolerations) || self.spec.tolerations == oldSelf.spec.tolerations)",message="spec.tolerations cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.volumes) == has(oldSelf.spec.volumes) && (!has(self.spec.volumes) || self.spec.volumes == oldSelf.spec.volumes)",message="spec.volumes cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.networkInterfaces) == has(oldSelf.spec.networkInterfaces) && (!has(self.spec.networkInterfaces) || self.spec.networkInterfaces == oldSelf.spec.networkInterfaces)",message="spec.networkInterfaces cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:validation:XValidation:rule="has(self.spec.dataTemplateRef) == has(oldSelf.spec.dataTemplateRef) && (!has(self.spec.dataTemplateRef) || self.spec.dataTemplateRef == oldSelf.spec.dataTemplateRef)",message="spec.dataTemplateRef cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate and let Cluster API replace the machine"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AnvilMachineSpec   `json:"spec"`
	Status AnvilMachineStatus `json:"status,omitempty"`
}

// AnvilMachineList is a list of AnvilMachines.
// +kubebuilder:object:root=true
type AnvilMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilMachine{}, &AnvilMachineList{})
}
