package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// HostSpec is what the infrastructure team declares about one server, and (in image,
// configDrive and consumerRef) what the metal runtime asks of it for the Machine it holds.
type HostSpec struct {
	// BMC is how the server's baseboard management controller is reached.
	// +required
	BMC BMC `json:"bmc"`

	// BootMACAddress is the MAC address of the NIC the server boots from.
	// +required
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	BootMACAddress string `json:"bootMACAddress"`

	// Architecture of the server's CPUs. A Machine gets the OS image entry of this
	// architecture.
	// +required
	Architecture computev1alpha1.Architecture `json:"architecture"`

	// Online is whether the server should be powered on. For a Host held by a Machine the
	// metal runtime sets it from the Machine's spec.power.
	// +optional
	Online bool `json:"online,omitempty"`

	// RootDeviceHints choose the disk the OS is written to. Empty lets the provisioner pick
	// the smallest disk of at least 4 GiB.
	// +optional
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// BootMode is the server's firmware: UEFI, or Legacy (BIOS). The provisioner boots
	// the server's deploy media and image in this mode.
	// +optional
	// +kubebuilder:default=UEFI
	BootMode BootMode `json:"bootMode,omitempty"`

	// Image, when set, is what the Host should be provisioned with. Clearing it
	// deprovisions the Host.
	// +optional
	Image *HostImage `json:"image,omitempty"`

	// ConfigDrive names a Secret in the Host's namespace whose keys user_data, meta_data
	// (JSON) and network_data (JSON) become the server's config drive.
	// +optional
	ConfigDrive *SecretReference `json:"configDrive,omitempty"`

	// ConsumerRef is the Machine holding this Host. The metal runtime claims a free Host by
	// setting it with an optimistic-concurrency update; only it clears it.
	// +optional
	ConsumerRef *ConsumerReference `json:"consumerRef,omitempty"`

	// Detached asks the provisioner to forget the Host while the server keeps running as it
	// is. Setting it back to false registers and adopts the Host again.
	// +optional
	Detached bool `json:"detached,omitempty"`
}

// BMC says how to reach a server's baseboard management controller.
type BMC struct {
	// Address of the BMC: redfish://host[:port]/redfish/v1/Systems/ID (HTTPS; redfish+http://
	// for plain HTTP), redfish-virtualmedia://... (the same), ipmi://host[:port], or
	// fake://name for the provisioner's fake hardware (tests and demos).
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(redfish|redfish-virtualmedia)([+]https?)?://[^/]+') || self.matches('^(ipmi|fake)://[^/]+$')",message="bmc.address must be redfish://host/redfish/v1/Systems/ID (or redfish+http://, redfish-virtualmedia://), ipmi://host[:port] or fake://name"
	Address string `json:"address"`

	// CredentialsSecretRef names a Secret in the Host's namespace with keys username and
	// password. Required for every address but fake://.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// DisableCertificateVerification skips TLS verification of a Redfish BMC.
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// SecretReference names a Secret in the referring object's namespace.
type SecretReference struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RootDeviceHints select the install disk; every hint set must match.
type RootDeviceHints struct {
	// DeviceName such as /dev/sda or /dev/disk/by-path/...
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// SerialNumber of the disk.
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// WWN of the disk.
	// +optional
	WWN string `json:"wwn,omitempty"`
	// MinSizeGigabytes is the smallest disk size accepted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinSizeGigabytes int32 `json:"minSizeGigabytes,omitempty"`
	// Rotational selects spinning (true) or solid-state (false) disks.
	// +optional
	Rotational *bool `json:"rotational,omitempty"`
}

// HostImage is what a server is provisioned with: a disk image written to its disk (url,
// checksum, format), or a kernel and initramfs it boots from RAM with nothing written to
// its disks (kernel, initramfs, kernelArguments; Ironic's ramdisk deploy, which boots them
// from an ISO over Redfish virtual media).
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.kernel)",message="image: give url and checksum (a disk image) or kernel and initramfs (booted from RAM), not both"
// +kubebuilder:validation:XValidation:rule="has(self.kernel) == has(self.initramfs)",message="image: kernel and initramfs go together"
// +kubebuilder:validation:XValidation:rule="!has(self.url) || has(self.checksum)",message="image.checksum is required with image.url"
// +kubebuilder:validation:XValidation:rule="has(self.url) || (!has(self.checksum) && !has(self.format))",message="image.checksum and image.format describe image.url; a kernel and initramfs carry their own checksums"
// +kubebuilder:validation:XValidation:rule="has(self.kernel) || !has(self.kernelArguments)",message="image.kernelArguments is the command line of image.kernel"
type HostImage struct {
	// URL the provisioner downloads the disk image from.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="image.url must be an http:// or https:// URL"
	URL string `json:"url,omitempty"`
	// Checksum of the disk image: sha256:<64 hex digits>.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Checksum string `json:"checksum,omitempty"`
	// Format of the disk image; raw when empty.
	// +optional
	Format ImageFormat `json:"format,omitempty"`
	// Kernel the server boots from RAM.
	// +optional
	Kernel *BootFile `json:"kernel,omitempty"`
	// Initramfs the kernel runs from RAM.
	// +optional
	Initramfs *BootFile `json:"initramfs,omitempty"`
	// KernelArguments is the kernel's command line.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KernelArguments string `json:"kernelArguments,omitempty"`
}

// BootFile is one file a server boots: where it is and its checksum.
type BootFile struct {
	// URL the provisioner downloads the file from.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="the URL of a kernel or initramfs must be http:// or https://"
	URL string `json:"url"`
	// Checksum of the file: sha256:<64 hex digits>.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Checksum string `json:"checksum"`
}

// Ramdisk reports whether the image is a kernel and initramfs booted from RAM.
func (i *HostImage) Ramdisk() bool { return i != nil && i.Kernel != nil }

// Same reports whether o boots what i boots. Checksums decide, not URLs: the same bytes
// served from another address are the same image; a disk's format and a kernel's
// command line count too.
func (i *HostImage) Same(o *HostImage) bool {
	switch {
	case i == nil || o == nil || i.Ramdisk() != o.Ramdisk():
		return false
	case i.Ramdisk():
		return i.Initramfs != nil && o.Initramfs != nil && i.Kernel.Checksum == o.Kernel.Checksum &&
			i.Initramfs.Checksum == o.Initramfs.Checksum && i.KernelArguments == o.KernelArguments
	}
	return i.Checksum == o.Checksum && i.Format.OrRaw() == o.Format.OrRaw()
}

// BootMode is a server's firmware.
// +kubebuilder:validation:Enum=UEFI;Legacy
type BootMode string

const (
	BootModeUEFI   BootMode = "UEFI"
	BootModeLegacy BootMode = "Legacy"
)

// ImageFormat is the format of a Host's disk image.
// +kubebuilder:validation:Enum=raw;qcow2
type ImageFormat string

const (
	ImageFormatRaw   ImageFormat = "raw"
	ImageFormatQCOW2 ImageFormat = "qcow2"
)

// OrRaw is the format, raw when empty.
func (f ImageFormat) OrRaw() ImageFormat {
	if f == "" {
		return ImageFormatRaw
	}
	return f
}

// ConsumerReference names the Machine holding a Host.
type ConsumerReference struct {
	// Namespace of the Machine.
	// +required
	Namespace string `json:"namespace"`
	// Name of the Machine.
	// +required
	Name string `json:"name"`
	// UID of the Machine, so a new Machine of the same name is not mistaken for the holder.
	// +required
	UID string `json:"uid"`
}

// ProvisioningState is where a Host is in its life. The zero value "" means the Host
// controller has not observed the Host yet; it is never written.
// +kubebuilder:validation:Enum=Registering;Inspecting;Available;Provisioning;Provisioned;Deprovisioning;Deleting
type ProvisioningState string

const (
	StateRegistering    ProvisioningState = "Registering"
	StateInspecting     ProvisioningState = "Inspecting"
	StateAvailable      ProvisioningState = "Available"
	StateProvisioning   ProvisioningState = "Provisioning"
	StateProvisioned    ProvisioningState = "Provisioned"
	StateDeprovisioning ProvisioningState = "Deprovisioning"
	StateDeleting       ProvisioningState = "Deleting"
)

// OperationalStatus says whether a Host is working in its state.
// +kubebuilder:validation:Enum=OK;Error;Detached
type OperationalStatus string

const (
	OperationalOK       OperationalStatus = "OK"
	OperationalError    OperationalStatus = "Error"
	OperationalDetached OperationalStatus = "Detached"
)

// PowerState is what the BMC last reported.
// +kubebuilder:validation:Enum=On;Off;Unknown
type PowerState string

const (
	PowerOn      PowerState = "On"
	PowerOff     PowerState = "Off"
	PowerUnknown PowerState = "Unknown"
)

// HostStatus is what the Host controller observed.
type HostStatus struct {
	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ProvisioningState is where the Host is in its life.
	// +optional
	ProvisioningState ProvisioningState `json:"provisioningState,omitempty"`
	// OperationalStatus is OK, Error (lastError says why) or Detached.
	// +optional
	OperationalStatus OperationalStatus `json:"operationalStatus,omitempty"`
	// PowerState as the BMC reported it.
	// +optional
	PowerState PowerState `json:"powerState,omitempty"`
	// Image the server runs, as last observed. Adoption, when the provisioner loses its
	// records, goes by the deployment record (annotation metal.anvil.dev/deployment), which
	// a lost status does not take with it.
	// +optional
	Image *HostImage `json:"image,omitempty"`
	// LastError is the most recent failure, cleared once the Host works again.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// ErrorCount counts failures in a row, for back-off.
	// +optional
	ErrorCount int32 `json:"errorCount,omitempty"`
	// Hardware summarises what inspection found; the HardwareData of the same name has
	// the details.
	// +optional
	Hardware *HardwareSummary `json:"hardware,omitempty"`
	// ProvisionerID is the provisioner's id of the Host (Ironic's node UUID).
	// +optional
	ProvisionerID string `json:"provisionerID,omitempty"`
	// RebootToken is the value of the metal.anvil.dev/reboot annotation last carried out.
	// +optional
	RebootToken string `json:"rebootToken,omitempty"`
	// RebuildToken is the value of the metal.anvil.dev/rebuild annotation last carried out:
	// the server was redeployed (or first deployed) for it.
	// +optional
	RebuildToken string `json:"rebuildToken,omitempty"`
	// CredentialsVersion is the resourceVersion of the credentials Secret last registered,
	// so a changed Secret registers the Host again.
	// +optional
	CredentialsVersion string `json:"credentialsVersion,omitempty"`
	// WipeStartedAt is when the eraser was last deployed on the server, for its time-out.
	// +optional
	WipeStartedAt *metav1.Time `json:"wipeStartedAt,omitempty"`
	// PowerChange is the change of the server's power under way while its power differs
	// from spec.online: how many times it was asked for and failed, for the retries'
	// back-off. Absent once the power is as spec.online says.
	// +optional
	PowerChange *PowerChange `json:"powerChange,omitempty"`
	// Conditions: Registered, Inspected, Provisioned, Wiped, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PowerChange records the attempts to switch a server's power as its Host's spec.online
// says. An attempt is asked of the provisioner; it failed when the provisioner is done with
// it (its last_error says why, if anything) and the power still differs. Failed attempts
// are retried after a back-off that grows with Failures from LastFailureAt (5 s, doubling,
// at most 60 s), so a BMC that keeps failing is asked about once a minute, not at every
// poll; the record survives restarts of the Host controller with the status.
type PowerChange struct {
	// Target is the power the attempts switch to: On or Off, as spec.online said when
	// they began. A record for the other power is void: the spec changed.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == 'On' || self == 'Off'",message="target is On or Off"
	Target PowerState `json:"target"`
	// Attempts is how many times the provisioner was asked to switch the power since it
	// last was as spec.online says: Failures, or one more while an attempt is under way.
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts"`
	// Failures is how many of those attempts failed, in a row.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// LastFailureAt is when the last failure was seen; the next attempt waits its back-off
	// from here.
	// +optional
	LastFailureAt *metav1.Time `json:"lastFailureAt,omitempty"`
}

// PowerFailing reports whether the server's power cannot be switched as spec.online says:
// the Host controller's last attempt failed (status.powerChange) and the power still
// differs from what is asked.
func (h *Host) PowerFailing() bool {
	want := PowerOff
	if h.Spec.Online {
		want = PowerOn
	}
	c := h.Status.PowerChange
	return c != nil && c.Failures > 0 && c.Target == want && h.Status.PowerState != want
}

// HardwareSummary is the short form of a HardwareData, for `kubectl get hosts`.
type HardwareSummary struct {
	Architecture computev1alpha1.Architecture `json:"architecture,omitempty"`
	CPUs         int32                        `json:"cpus,omitempty"`
	MemoryMiB    int64                        `json:"memoryMiB,omitempty"`
	Disks        int32                        `json:"disks,omitempty"`
	NICs         int32                        `json:"nics,omitempty"`
}

// Host is one bare-metal server, in an infrastructure namespace. Its labels are what
// Machines' hostSelectors and HostPolicies select on.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bmh
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.provisioningState`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.operationalStatus`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerState`
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.architecture`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`
// +kubebuilder:printcolumn:name="Consumer-NS",type=string,JSONPath=`.spec.consumerRef.namespace`,priority=1
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.status.hardware.cpus`,priority=1
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.status.hardware.memoryMiB`,priority=1
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=`.status.lastError`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Host struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostSpec   `json:"spec"`
	Status HostStatus `json:"status,omitempty"`
}

// HostList is a list of Hosts.
// +kubebuilder:object:root=true
type HostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Host `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Host{}, &HostList{})
}
