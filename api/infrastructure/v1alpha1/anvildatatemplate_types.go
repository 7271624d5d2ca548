package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// MetaDataProviderID is the first-boot metadata key the provider always sets on the anvil
// Machines it makes: the machine's providerID (anvil://<namespace>/<name>), which the node
// agent in the guest writes into its Node.
const MetaDataProviderID = "provider-id"

// AnvilDataTemplateSpec renders each machine's hostname and first-boot metadata (the anvil
// Machine's spec.hostname and spec.metaData) from the machine's index within the template,
// its names, the server's HardwareData and static lists, so one template serves a whole
// MachineDeployment.
type AnvilDataTemplateSpec struct {
	// Hostname is the pattern of each machine's hostname: text with the placeholders
	// {cluster} (the Cluster's name), {machine} (the Machine's name) and {index}, replaced
	// as written (no other template language). Empty: the anvil Machine's name. The result
	// must be a hostname (RFC 1123, at most 63 characters): the machine is refused otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.replace('{cluster}', 'c').replace('{machine}', 'm').replace('{index}', '0').matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="hostname must be lowercase letters, digits, '-', '.' and the placeholders {cluster}, {machine} and {index}, making an RFC 1123 hostname"
	Hostname string `json:"hostname,omitempty"`

	// MetaData are the keys of each machine's first-boot metadata, each from one source.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=31
	MetaData []MetaDataEntry `json:"metaData,omitempty"`
}

// MetaDataEntry is one key of the rendered metadata and where its value comes from: exactly
// one of value, index, addresses or hardware.
// +kubebuilder:validation:XValidation:rule="[has(self.value), has(self.index), has(self.addresses), has(self.hardware)].filter(x, x).size() == 1",message="each metaData entry sets exactly one of value, index, addresses or hardware"
type MetaDataEntry struct {
	// Key is the metadata key, as the anvil Machine's spec.metaData takes it; provider-id is
	// the provider's own (anvil://<namespace>/<name>, which the node agent reads).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="metaData keys must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['instance-id', 'uuid', 'name', 'hostname', 'local-hostname', 'provider-id'])",message="metaData keys instance-id, uuid, name, hostname, local-hostname and provider-id are written by the runtime or the provider: the hostname is spec.hostname"
	Key string `json:"key"`

	// Value is a fixed value, the same for every machine.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`

	// Index is the machine's index within the template, plus Offset, in decimal.
	// +optional
	Index *IndexSource `json:"index,omitempty"`

	// Addresses gives the machine with index i the i-th address of this list: a machine
	// whose index is past the end of the list is refused (add addresses to grow the
	// MachineDeployment).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a))",message="addresses must be IP addresses or CIDRs (10.0.0.5 or 10.0.0.5/24)"
	Addresses []string `json:"addresses,omitempty"`

	// Hardware is a value of the hardware the machine gets, which the runtime placing it
	// resolves when it writes the first boot (the anvil Machine's spec.hardwareMetaData): a
	// server's NIC MAC or disk serial from its HardwareData, a VM's NIC MAC (a VM has no
	// disk serials: its pool refuses such a machine). See docs/capi.md, Data templates.
	// +optional
	Hardware *HardwareSource `json:"hardware,omitempty"`
}

// IndexSource is the machine's index as a value.
type IndexSource struct {
	// Offset is added to the index (0 by default).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Offset int32 `json:"offset,omitempty"`
}

// HardwareSource is one value of a server's HardwareData.
type HardwareSource struct {
	// Field is what to read: NICMACAddress or DiskSerialNumber.
	// +required
	Field computev1alpha1.HardwareField `json:"field"`
	// Name is the NIC's or the disk's name: in a server's HardwareData (eth0, sda), or a
	// VM's NIC as the AnvilMachine's networkInterfaces names it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
}

// AnvilDataTemplateStatus records which machine has which index.
type AnvilDataTemplateStatus struct {
	// Indexes maps each machine (its AnvilMachine's name) to its index: unique, kept while
	// the machine exists, freed when it is deleted and then given again, lowest first. It is
	// written with optimistic concurrency (an update that names the resourceVersion it
	// read), so two writers never give one index twice: the one that loses re-reads.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	Indexes map[string]int32 `json:"indexes,omitempty"`
}

// AnvilDataTemplate renders per-machine first-boot metadata for the AnvilMachines whose
// spec.dataTemplateRef names it (in its namespace).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvildatatemplates,shortName=adt,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilDataTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AnvilDataTemplateSpec   `json:"spec,omitempty"`
	Status AnvilDataTemplateStatus `json:"status,omitempty"`
}

// AnvilDataTemplateList is a list of AnvilDataTemplates.
// +kubebuilder:object:root=true
type AnvilDataTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilDataTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilDataTemplate{}, &AnvilDataTemplateList{})
}
