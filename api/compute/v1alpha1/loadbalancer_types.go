package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoadBalancerSpec says which machines' port a LoadBalancer sends connections to.
// +kubebuilder:validation:XValidation:rule="self.network == oldSelf.network",message="spec.network cannot be changed: the load balancer's addresses are on that network's segment; create another LoadBalancer"
type LoadBalancerSpec struct {
	// Network is a segment network of the pools (MachinePool status.networks[].segment):
	// the backends are the selected machines' addresses on this namespace's segment of it,
	// and the machines there reach the load balancer at the segment's gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Network string `json:"network"`

	// Selector picks the backends: the Machines of this namespace with all these labels.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	Selector map[string]string `json:"selector"`

	// Port is the backends' port every connection goes to.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// Endpoint is a host and a TCP port.
type Endpoint struct {
	// +required
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// LoadBalancerStatus is where the load balancer listens and where it sends connections.
type LoadBalancerStatus struct {
	// Endpoint is where the load balancer listens on its pools' host (a loopback address):
	// for whatever runs there, such as Cluster API's controllers. Set once, and kept: a
	// workload cluster's certificates name it.
	// +optional
	Endpoint *Endpoint `json:"endpoint,omitempty"`

	// SegmentEndpoint is where the machines on the segment reach the load balancer: the
	// segment's gateway address, at Endpoint's port. A machine forwards a local port of its
	// own to it to reach Endpoint's address (a node-local proxy), so the host and the
	// machines use one address.
	// +optional
	SegmentEndpoint *Endpoint `json:"segmentEndpoint,omitempty"`

	// Backends are the addresses connections go to now, at spec.port: the segment
	// addresses of the selected machines, in the order they are tried.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	Backends []string `json:"backends,omitempty"`

	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Reasons of a LoadBalancer's Ready condition.
const (
	// ReasonServing: it listens at its endpoint (and at its segment endpoint while the
	// segment is open: a machine of the namespace is on it).
	ReasonServing = "Serving"
	// ReasonNoSuchSegment: spec.network is not a segment network of the pools served here.
	ReasonNoSuchSegment = "NoSuchSegment"
	// ReasonPortsExhausted: every port of the range the load balancers are given is taken.
	ReasonPortsExhausted = "PortsExhausted"
	// ReasonEndpointUnavailable: the endpoint recorded in the status cannot be listened at
	// again (another process holds the port); it is kept, since clients name it.
	ReasonEndpointUnavailable = "EndpointUnavailable"
)

// LoadBalancer forwards TCP connections to a port of some machines of its namespace: from a
// loopback address on their pools' host (Cluster API's controllers reach a workload cluster's
// API servers there), and from the segment's gateway (the machines reach the same servers
// there). anvil gives it its addresses; it never reaches a machine of another namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lb
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.network`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.endpoint.host`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.status.endpoint.port`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerSpec   `json:"spec"`
	Status LoadBalancerStatus `json:"status,omitempty"`
}

// LoadBalancerList is a list of LoadBalancers.
// +kubebuilder:object:root=true
type LoadBalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LoadBalancer{}, &LoadBalancerList{})
}
