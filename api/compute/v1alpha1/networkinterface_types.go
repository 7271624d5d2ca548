package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkInterfaceSpec is a NIC a Machine can attach.
type NetworkInterfaceSpec struct {
	// Network names the network the NIC joins.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Network string `json:"network"`
	// MACAddress, when set, is the NIC's hardware address.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	MACAddress string `json:"macAddress,omitempty"`
	// IPs, when set, are the addresses the NIC asks for.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	IPs []string `json:"ips,omitempty"`
}

// NetworkInterfaceStatus reports who holds the NIC and what it got.
type NetworkInterfaceStatus struct {
	// ClaimRef is the Machine holding the NIC; a NIC is held by at most one.
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`
	// IPs the NIC has.
	// +optional
	IPs []string `json:"ips,omitempty"`
	// Conditions: Claimed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NetworkInterface is a NIC in a namespace, attached to at most one Machine at a time.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nic
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.network`
// +kubebuilder:printcolumn:name="Machine",type=string,JSONPath=`.status.claimRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkInterface struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetworkInterfaceSpec   `json:"spec"`
	Status NetworkInterfaceStatus `json:"status,omitempty"`
}

// NetworkInterfaceList is a list of NetworkInterfaces.
// +kubebuilder:object:root=true
type NetworkInterfaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkInterface `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NetworkInterface{}, &NetworkInterfaceList{})
}
