package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolLeaseNamespace holds one coordination.k8s.io Lease per MachinePool, named after the
// pool and renewed by its poollet: the pool's heartbeat, kept out of the pool's status so
// a heartbeat is a small write that wakes nothing that watches pools.
const PoolLeaseNamespace = "anvil-pool-leases"

// MachinePoolSpec is what an operator declares about a pool.
type MachinePoolSpec struct {
	// ProviderID identifies the runtime endpoint behind the pool, for example
	// qemu://hypervisor-7 or metal://site-a.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ProviderID string `json:"providerID,omitempty"`

	// Taints keep Machines off the pool unless they tolerate them.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Taints []corev1.Taint `json:"taints,omitempty"`

	// Tenants says which namespaces may place Machines here. Empty allows every namespace.
	// +optional
	Tenants *TenantPolicy `json:"tenants,omitempty"`

	// Networks says who may put a NIC on each of the pool's networks. A network the pool's
	// runtime gives something (status.networks: forwards or outbound access) is reserved:
	// only the Machines its entry here allows may join it, and nobody when it has no entry.
	// A network the runtime gives nothing (a NIC on it reaches nothing) needs no entry.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Networks []NetworkAccess `json:"networks,omitempty"`
}

// NetworkAccess is who may join one network of a pool.
type NetworkAccess struct {
	// Name is the network, as a NetworkInterface's spec.network names it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Tenants are the namespaces whose Machines may join it. Unlike spec.tenants, empty
	// allows no namespace: a network is reserved unless opened.
	// +optional
	Tenants *TenantPolicy `json:"tenants,omitempty"`
	// Builders lets OS image builder Machines (made by the manager, carrying
	// LabelImageBuilder) join it, whatever their namespace.
	// +optional
	Builders bool `json:"builders,omitempty"`
}

// LabelImageBuilder marks a Machine the manager made to build an OS image. Only a user who
// may create OSImageBuilds in the namespace may set it, or change a marked Machine's spec
// (admission policy anvil-image-builder-marker), so pools can trust it.
const LabelImageBuilder = "compute.anvil.dev/image-builder"

// TenantPolicy allows namespaces by name or by label. A namespace matching either is allowed.
type TenantPolicy struct {
	// Namespaces allowed by name.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelector allows namespaces whose labels match.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// MachinePoolStatus is what the pool's poollet reports.
type MachinePoolStatus struct {
	// Architectures the pool can run.
	// +optional
	Architectures []Architecture `json:"architectures,omitempty"`
	// Execution says, for each of those architectures, whether the pool runs its guests
	// natively or emulated. An architecture missing here counts as emulated.
	// +optional
	// +listType=map
	// +listMapKey=architecture
	Execution []ArchitectureExecution `json:"execution,omitempty"`
	// Capacity is every resource the pool has.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is what the pool offers to Machines: capacity less what the pool keeps
	// for itself. It is NOT reduced by the Machines bound to the pool; the scheduler
	// subtracts those, once each.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Allocated is what the Machines bound to the pool and not Terminated ask for (their
	// classes' capabilities), as its poollet last counted them: what the scheduler
	// subtracts from Allocatable. It lets a reader that may not list every namespace's
	// Machines (a broker of an upstream anvil) know what is free.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// SupportedClasses are the MachineClasses the pool can run.
	// +optional
	SupportedClasses []string `json:"supportedClasses,omitempty"`
	// Addresses of the pool's runtime endpoint.
	// +optional
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// Networks are the NIC networks with a meaning on this pool: what a Machine's
	// NetworkInterface on one reaches. A NIC on a network not listed reaches nothing of
	// the pool's host and nothing beyond it.
	// +optional
	// +listType=map
	// +listMapKey=name
	Networks []PoolNetwork `json:"networks,omitempty"`
	// Console is where anvil's console server reaches the consoles of the pool's Machines:
	// the pool's poollet's console endpoint (docs/console.md). Unset: the poollet serves
	// none.
	// +optional
	Console *PoolConsoleEndpoint `json:"console,omitempty"`
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Execution is how a pool runs guests of one architecture.
// +kubebuilder:validation:Enum=Native;Emulated
type Execution string

const (
	// ExecutionUnknown is the zero value, invalid: a pool that does not say is emulated.
	ExecutionUnknown Execution = ""
	// ExecutionNative: bare metal, or hardware virtualisation on a host of that architecture.
	ExecutionNative Execution = "Native"
	// ExecutionEmulated: the instruction set is emulated (QEMU TCG): correct, many times slower.
	ExecutionEmulated Execution = "Emulated"
)

// ArchitectureExecution is how a pool runs one architecture.
type ArchitectureExecution struct {
	Architecture Architecture `json:"architecture"`
	Execution    Execution    `json:"execution"`
	// Reason says why an Emulated architecture is not run natively, when the runtime says
	// (for example: the host's KVM runs no guest).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// NativeArchitectures are the architectures the pool's status says it runs natively.
func (s *MachinePoolStatus) NativeArchitectures() []Architecture {
	var native []Architecture
	for _, e := range s.Execution {
		if e.Execution == ExecutionNative {
			native = append(native, e.Architecture)
		}
	}
	return native
}

// PoolNetwork is what a NIC network of a pool gives its guests.
type PoolNetwork struct {
	// Name is what a NetworkInterface's network names.
	Name string `json:"name"`
	// Forwards are the host's services a guest reaches at addresses of its own network.
	// +optional
	Forwards []NetworkForward `json:"forwards,omitempty"`
	// NAT gives the guest outbound connections to the outside world's public addresses.
	// On a QEMU pool this is an HTTP proxy at 10.0.2.4:3128 (CONNECT and http:// requests),
	// not transparent NAT; it never reaches the host's loopback, private or link-local
	// addresses.
	// +optional
	NAT bool `json:"nat,omitempty"`
	// Segment, when set, is the subnet of a switched network: a NIC there reaches the NICs
	// of its own namespace's Machines there (one segment per namespace, on every pool of
	// the host) and is given an address of the subnet by DHCP; the first address is the
	// gateway. Joining one needs no spec.networks entry: it reaches no one else.
	// +optional
	Segment string `json:"segment,omitempty"`
}

// NetworkForward: a guest's connection to Guest (address:port of the guest's network)
// reaches Target (a service of the pool's host).
type NetworkForward struct {
	Guest  string `json:"guest"`
	Target string `json:"target"`
}

// MachinePool is one runtime endpoint: a hypervisor, or a site of bare-metal servers.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mpool
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Architectures",type=string,JSONPath=`.status.architectures`
// +kubebuilder:printcolumn:name="Execution",type=string,JSONPath=`.status.execution[*].execution`,priority=1
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.allocatable.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.allocatable.memory`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachinePoolSpec   `json:"spec,omitempty"`
	Status MachinePoolStatus `json:"status,omitempty"`
}

// MachinePoolList is a list of MachinePools.
// +kubebuilder:object:root=true
type MachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachinePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachinePool{}, &MachinePoolList{})
}

// PoolConsoleEndpoint is a poollet's console endpoint.
type PoolConsoleEndpoint struct {
	// Address is host:port.
	// +kubebuilder:validation:MinLength=1
	Address string `json:"address"`
	// CABundle is the PEM of the CA that signed the endpoint's serving certificate, made by
	// the poollet as it started.
	CABundle []byte `json:"caBundle"`
}
