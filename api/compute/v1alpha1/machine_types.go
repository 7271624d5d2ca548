package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageAnnotationKubernetesVersion is the annotation of an OS image carrying Kubernetes' node
// binaries (kubelet, kubeadm) of that version, such as v1.36.3: anvil's node image has it
// (make node-image), and a Kubernetes node's Machine requires it (requiredImageAnnotations).
const ImageAnnotationKubernetesVersion = "dev.anvil.kubernetes.version"

// Default keys read from first-boot configuration Secrets.
const (
	DefaultIgnitionKey = "ignition"
	DefaultUserDataKey = "userData"
)

// MachineSpec is what the user wants: a machine of a class, booting an image, on a pool
// that fits, powered on or off.
// +kubebuilder:validation:XValidation:rule="!has(self.hardwareMetaData) || !has(self.metaData) || self.hardwareMetaData.all(h, !(h.key in self.metaData))",message="a hardwareMetaData key is also a metaData key: give each key one source"
// +kubebuilder:validation:XValidation:rule="(has(self.metaData) ? size(self.metaData) : 0) + (has(self.hardwareMetaData) ? size(self.hardwareMetaData) : 0) <= 32",message="metaData and hardwareMetaData have more than 32 keys together: at most 32"
// +kubebuilder:validation:XValidation:rule="!(has(self.ignitionRef) && has(self.userDataRef))",message="set ignitionRef or userDataRef, not both: a machine boots with one kind of first-boot configuration"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || !has(self.machinePoolRef) || self.machinePoolRef.name == oldSelf.machinePoolRef.name",message="machinePoolRef cannot be changed once the Machine is bound; delete and recreate the Machine to move it"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.filter(v, has(v.image)).size() <= 1",message="at most one volume may be the root disk (image source)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || self.machineClassRef == oldSelf.machineClassRef",messageExpression="'machineClassRef cannot be changed once the Machine is bound (to pool ' + oldSelf.machinePoolRef.name + '): delete and recreate the Machine for another class'"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || (has(self.architecture) == has(oldSelf.architecture) && (!has(self.architecture) || self.architecture == oldSelf.architecture))",messageExpression="'architecture cannot be changed once the Machine is bound (to pool ' + oldSelf.machinePoolRef.name + '): delete and recreate the Machine for another architecture'"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || (has(self.volumes) == has(oldSelf.volumes) && (!has(self.volumes) || self.volumes == oldSelf.volumes))",messageExpression="'volumes cannot be changed once the Machine is bound (to pool ' + oldSelf.machinePoolRef.name + '): delete and recreate the Machine with the volumes it needs'"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || (has(self.hostname) == has(oldSelf.hostname) && (!has(self.hostname) || self.hostname == oldSelf.hostname))",messageExpression="'hostname cannot be changed once the Machine is bound (to pool ' + oldSelf.machinePoolRef.name + '): its guest has taken its name; delete and recreate the Machine to rename it'"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.machinePoolRef) || (has(self.networkInterfaces) == has(oldSelf.networkInterfaces) && (!has(self.networkInterfaces) || self.networkInterfaces == oldSelf.networkInterfaces))",messageExpression="'networkInterfaces cannot be changed once the Machine is bound (to pool ' + oldSelf.machinePoolRef.name + '): delete and recreate the Machine with the network interfaces it needs'"
type MachineSpec struct {
	// MachineClassRef names the MachineClass, which sets the resources.
	// +required
	MachineClassRef MachineClassReference `json:"machineClassRef"`

	// Image is the OCI reference of the OS image. For a multi-arch image index each pool
	// boots the entry of its own architecture.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// RequiredImageAnnotations are what the image must say of itself: annotations its OCI
	// index (or, for a single image, its manifest) carries, each with exactly this value. A
	// Machine whose image lacks one is not scheduled (Scheduled False,
	// ImageRequirementsUnmet), so no machine boots an image that cannot do its job: a
	// Kubernetes node's template asks for dev.anvil.kubernetes.version (anvil's node image
	// carries it). Checked when the Machine is placed, where the scheduler reads the image's
	// registry (a manager that reads no image, --image-architectures=any, holds such a
	// Machine back, saying so); not on a reimage.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	RequiredImageAnnotations map[string]string `json:"requiredImageAnnotations,omitempty"`

	// ImageUpdatePolicy is what a bound Machine does when image changes: Reimage (the
	// default) boots the new image in place, keeping the machine's id, pool and other
	// volumes; Never keeps the image it booted, and ImageUpToDate says it is behind.
	// +optional
	// +kubebuilder:default=Reimage
	ImageUpdatePolicy ImageUpdatePolicy `json:"imageUpdatePolicy,omitempty"`

	// Architecture pins the CPU architecture. Empty means any architecture the image offers.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`

	// Emulation says whether the Machine may run on a pool that emulates its architecture
	// (MachinePool status.execution): Allowed, the default, or Forbidden.
	// +optional
	// +kubebuilder:default=Allowed
	Emulation Emulation `json:"emulation,omitempty"`

	// MachinePoolSelector restricts scheduling to pools with all these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	MachinePoolSelector map[string]string `json:"machinePoolSelector,omitempty"`

	// MachinePoolRef is the pool the Machine runs on. The scheduler sets it after checking
	// the pool's tenants and taints. Setting, changing or clearing it needs the bind verb
	// on that pool (admission policy anvil-machine-binding): the scheduler and
	// infrastructure admins have it, tenants choose pools with machinePoolSelector. Once
	// set it cannot be changed to another pool.
	// +optional
	MachinePoolRef *LocalObjectReference `json:"machinePoolRef,omitempty"`

	// HostSelector restricts a bare-metal pool's choice of server to Hosts with matching labels.
	// +optional
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`

	// Tolerations let the Machine onto pools with matching taints.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Power is the wanted power state.
	// +optional
	// +kubebuilder:default=On
	Power Power `json:"power,omitempty"`

	// IgnitionRef is a Secret holding an Ignition config (key default "ignition").
	// +optional
	IgnitionRef *SecretKeySelector `json:"ignitionRef,omitempty"`

	// UserDataRef is a Secret holding cloud-init user data (key default "userData").
	// +optional
	UserDataRef *SecretKeySelector `json:"userDataRef,omitempty"`

	// Hostname is the guest's hostname, as its first boot reads it (cloud-init's
	// local-hostname, the config drive's hostname). Empty: the Machine's name. It cannot
	// change once the Machine is bound: a running guest has taken its name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="hostname must be lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit (RFC 1123), at most 63 characters"
	Hostname string `json:"hostname,omitempty"`

	// MetaData is extra first-boot metadata, beside the keys the runtime writes itself
	// (instance-id, uuid, name, hostname, local-hostname, which it refuses here): top-level
	// keys of a NoCloud seed's meta-data, the "meta" map of a config drive's
	// meta_data.json, and fw_cfg opt/anvil/meta-data for an Ignition guest under QEMU (see
	// docs/api.md). Like the first-boot config, a change reaches a running machine at its
	// next reimage. At most 32 keys; a key is letters, digits, '-', '_' and '.', starting
	// and ending with a letter or digit, at most 63 characters; a value at most 1024
	// characters.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="metaData keys must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['instance-id', 'uuid', 'name', 'hostname', 'local-hostname']))",message="metaData keys instance-id, uuid, name, hostname and local-hostname are written by the runtime and cannot be set here: the hostname is spec.hostname, the others name the machine itself"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="metaData values must be at most 1024 characters: put larger data in the first-boot config (userDataRef or ignitionRef)"
	MetaData map[string]string `json:"metaData,omitempty"`

	// HardwareMetaData are first-boot metadata keys whose values come from the hardware
	// the machine gets: the runtime that places it resolves each one when it writes the
	// first boot (a server's from its HardwareData; a VM's NIC MAC from the MAC its
	// runtime gives that NIC), so the value is there at the first boot. The guest finds
	// them where it finds spec.metaData. A pool that cannot give a value refuses the
	// machine, naming why (a server without that NIC or disk, a VM asked for a disk
	// serial). Keys follow spec.metaData's rules, may not be one of its keys, and count
	// towards its 32.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=32
	HardwareMetaData []HardwareMetaData `json:"hardwareMetaData,omitempty"`

	// Volumes are the disks attached to the Machine.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=12
	Volumes []MachineVolume `json:"volumes,omitempty"`

	// NetworkInterfaces are the NICs attached to the Machine.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NetworkInterfaces []MachineNetworkInterface `json:"networkInterfaces,omitempty"`
}

// HardwareField names a value of the hardware a machine gets.
// +kubebuilder:validation:Enum=NICMACAddress;DiskSerialNumber
type HardwareField string

const (
	// HardwareFieldUnset is the zero value, which the API refuses: a reference always says
	// what it reads.
	HardwareFieldUnset HardwareField = ""
	// HardwareNICMACAddress is the MAC address of the NIC called Name.
	HardwareNICMACAddress HardwareField = "NICMACAddress"
	// HardwareDiskSerialNumber is the serial number of the disk called Name.
	HardwareDiskSerialNumber HardwareField = "DiskSerialNumber"
)

// HardwareMetaData is one first-boot metadata key whose value the runtime reads from the
// machine's hardware.
type HardwareMetaData struct {
	// Key is the metadata key, under spec.metaData's rules.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="hardwareMetaData keys must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['instance-id', 'uuid', 'name', 'hostname', 'local-hostname'])",message="hardwareMetaData keys instance-id, uuid, name, hostname and local-hostname are written by the runtime and cannot be set here"
	Key string `json:"key"`
	// Field is what to read: NICMACAddress (a server's NIC as its HardwareData names it,
	// eth0; a VM's NIC as spec.networkInterfaces names it) or DiskSerialNumber (a server's
	// disk as its HardwareData names it, sda).
	// +required
	Field HardwareField `json:"field"`
	// Name is the NIC's or the disk's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
}

// MachineClassReference names a MachineClass.
type MachineClassReference struct {
	// Name of the MachineClass: a DNS label.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="machineClassRef.name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// MachineVolume is one disk of a Machine. Exactly one source is set.
// +kubebuilder:validation:XValidation:rule="[has(self.image), has(self.emptyDisk), has(self.volumeRef), has(self.ephemeral)].filter(x, x).size() == 1",message="each volume sets exactly one of image, emptyDisk, volumeRef or ephemeral"
type MachineVolume struct {
	// Name is unique among the Machine's volumes.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Image makes this the root disk, filled from the Machine's image.
	// +optional
	Image *ImageDiskSource `json:"image,omitempty"`
	// EmptyDisk is a blank disk that lives and dies with the Machine.
	// +optional
	EmptyDisk *EmptyDiskSource `json:"emptyDisk,omitempty"`
	// VolumeRef attaches an existing Volume of the Machine's namespace.
	// +optional
	VolumeRef *LocalObjectReference `json:"volumeRef,omitempty"`
	// Ephemeral creates a Volume owned by the Machine, deleted with it.
	// +optional
	Ephemeral *EphemeralVolumeSource `json:"ephemeral,omitempty"`
}

// ImageDiskSource is the root disk, copied from the image's disk layer.
type ImageDiskSource struct {
	// Size grows the disk beyond the image's own size.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="image.size must be greater than zero"
	Size *resource.Quantity `json:"size,omitempty"`
}

// EmptyDiskSource is a blank disk.
type EmptyDiskSource struct {
	// Size of the disk.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="emptyDisk.size must be greater than zero"
	Size resource.Quantity `json:"size"`
}

// EphemeralVolumeSource is the template of a Volume created for, and owned by, the Machine.
type EphemeralVolumeSource struct {
	// +required
	VolumeTemplate VolumeTemplate `json:"volumeTemplate"`
}

// VolumeTemplate is the labels and spec of an ephemeral Volume.
type VolumeTemplate struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +required
	Spec VolumeSpec `json:"spec"`
}

// MachineNetworkInterface is one NIC of a Machine. Exactly one source is set.
// +kubebuilder:validation:XValidation:rule="has(self.networkInterfaceRef) != has(self.ephemeral)",message="each network interface sets exactly one of networkInterfaceRef or ephemeral"
type MachineNetworkInterface struct {
	// Name is unique among the Machine's network interfaces.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// NetworkInterfaceRef attaches an existing NetworkInterface of the Machine's namespace.
	// +optional
	NetworkInterfaceRef *LocalObjectReference `json:"networkInterfaceRef,omitempty"`
	// Ephemeral creates a NetworkInterface owned by the Machine, deleted with it.
	// +optional
	Ephemeral *EphemeralNetworkInterfaceSource `json:"ephemeral,omitempty"`
}

// EphemeralNetworkInterfaceSource is the template of a NetworkInterface owned by the Machine.
type EphemeralNetworkInterfaceSource struct {
	// +required
	NetworkInterfaceTemplate NetworkInterfaceTemplate `json:"networkInterfaceTemplate"`
}

// NetworkInterfaceTemplate is the labels and spec of an ephemeral NetworkInterface.
type NetworkInterfaceTemplate struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +required
	Spec NetworkInterfaceSpec `json:"spec"`
}

// MachineState is what is observed of a Machine.
// +kubebuilder:validation:Enum=Pending;Running;Shutdown;Terminating;Terminated
type MachineState string

const (
	// MachineStatePending: accepted, not yet running (unscheduled, or being set up).
	MachineStatePending MachineState = "Pending"
	// MachineStateRunning: powered on and running.
	MachineStateRunning MachineState = "Running"
	// MachineStateShutdown: powered off; can be powered on again.
	MachineStateShutdown MachineState = "Shutdown"
	// MachineStateTerminating: deletion in progress.
	MachineStateTerminating MachineState = "Terminating"
	// MachineStateTerminated: permanently stopped.
	MachineStateTerminated MachineState = "Terminated"
)

// MachineStatus is what anvil observes of a Machine.
type MachineStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State is the observed lifecycle state.
	// +optional
	State MachineState `json:"state,omitempty"`
	// Conditions: Scheduled, ImageReady, IgnitionReady, VolumesReady, NetworkInterfacesReady, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// MachineID is the runtime's id of the machine.
	// +optional
	MachineID string `json:"machineID,omitempty"`
	// Pool is the pool the machine runs on, as the runtime reported it.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Architecture the machine runs, resolved from the image and pool.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`
	// Image is what the runtime was given when it created the machine.
	// +optional
	Image *BootedImage `json:"image,omitempty"`
	// Addresses of the machine.
	// +optional
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// Volumes reports each volume's attach state.
	// +optional
	// +listType=map
	// +listMapKey=name
	Volumes []AttachmentStatus `json:"volumes,omitempty"`
	// NetworkInterfaces reports each NIC's attach state.
	// +optional
	// +listType=map
	// +listMapKey=name
	NetworkInterfaces []AttachmentStatus `json:"networkInterfaces,omitempty"`
	// RebootToken is the compute.anvil.dev/reboot token of the last reboot the runtime
	// carried out: a reboot asked with a token is done once this equals it.
	// +optional
	RebootToken string `json:"rebootToken,omitempty"`
}

// BootedImage is the image a machine was created from.
type BootedImage struct {
	// Reference is spec.image as it was when the machine was created.
	Reference string `json:"reference"`
	// Digest is what the reference resolved to then: an index's digest for a multi-arch
	// image, whose entry for status.architecture the machine booted.
	Digest string `json:"digest"`
}

// MachineAddress is one address of a machine.
type MachineAddress struct {
	// Type is, for example, InternalIP, ExternalIP or Hostname.
	Type string `json:"type"`
	// Address is the value.
	Address string `json:"address"`
}

// AttachmentStatus is the attach state of one volume or NIC, by its name in the spec.
type AttachmentStatus struct {
	Name  string      `json:"name"`
	State AttachState `json:"state"`
	// Handle is the runtime's id of the attached device, when it has one.
	// +optional
	Handle string `json:"handle,omitempty"`
}

// Machine is a declared machine: a virtual machine or a bare-metal server, chosen by class
// and placed on a pool by anvil.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ma
// +kubebuilder:selectablefield:JSONPath=`.spec.machinePoolRef.name`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.machineClassRef.name`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.machinePoolRef.name`
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.status.architecture`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.spec.power`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Machine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineSpec   `json:"spec"`
	Status MachineStatus `json:"status,omitempty"`
}

// MachineList is a list of Machines.
// +kubebuilder:object:root=true
type MachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Machine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Machine{}, &MachineList{})
}
