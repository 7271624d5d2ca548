package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// HardwareDataSpec is what inspection found on a server.
type HardwareDataSpec struct {
	// Architecture of the CPUs.
	// +optional
	Architecture computev1alpha1.Architecture `json:"architecture,omitempty"`
	// CPU is the processor summary.
	// +optional
	CPU CPU `json:"cpu,omitempty"`
	// MemoryMiB is the RAM size.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Disks found.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Disks []Disk `json:"disks,omitempty"`
	// NICs found.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	NICs []NIC `json:"nics,omitempty"`
}

// CPU describes a server's processors.
type CPU struct {
	// Count of logical CPUs.
	// +optional
	Count int32 `json:"count,omitempty"`
	// Model name.
	// +optional
	Model string `json:"model,omitempty"`
	// Flags the CPU reports, when inspection collected them.
	// +optional
	// +kubebuilder:validation:MaxItems=512
	Flags []string `json:"flags,omitempty"`
}

// Disk is one block device.
type Disk struct {
	Name string `json:"name"`
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// +optional
	Rotational bool `json:"rotational,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	WWN string `json:"wwn,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
}

// NIC is one network interface.
type NIC struct {
	Name string `json:"name"`
	// +optional
	MACAddress string `json:"macAddress,omitempty"`
	// +optional
	IP string `json:"ip,omitempty"`
	// +optional
	SpeedGbps int32 `json:"speedGbps,omitempty"`
}

// HardwareData is the hardware inventory of one server. In the infrastructure namespace it
// has the name of its Host. The metal runtime also writes a copy into the namespace of the
// Machine holding the Host, named after the Machine, owned by it, and labelled
// metal.anvil.dev/machine: that copy is the only part of a server a tenant reads.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hwdata
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.architecture`
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.cpu.count`
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.spec.memoryMiB`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HardwareData struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HardwareDataSpec `json:"spec,omitempty"`
}

// HardwareDataList is a list of HardwareData.
// +kubebuilder:object:root=true
type HardwareDataList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HardwareData `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HardwareData{}, &HardwareDataList{})
}
