package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// DefaultFailureDomainLabel is the pool label whose values are a cluster's failure domains
// unless spec.failureDomainLabel names another.
const DefaultFailureDomainLabel = "topology.kubernetes.io/zone"

// AnvilClusterSpec is what a whole Cluster API cluster shares on anvil.
type AnvilClusterSpec struct {
	// ControlPlaneEndpoint is where the workload cluster's API server is reached. Leave it
	// empty to have the provider set it from the first control-plane machine's address. Once
	// set it cannot change: the cluster's certificates and kubeconfigs name it.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// ControlPlaneLoadBalancer has anvil make the control-plane endpoint: a LoadBalancer
	// (compute.anvil.dev) named after the AnvilCluster, where the cluster's anvil Machines
	// live, sending to port 6443 of the control-plane machines on Network's segment.
	// spec.controlPlaneEndpoint is then set to its endpoint (unless set already), and every
	// machine of the cluster gets the first-boot metadata its node-local proxy needs
	// (control-plane-endpoint, control-plane-forward: docs/loadbalancer.md). Once set it
	// cannot change.
	// +optional
	ControlPlaneLoadBalancer *ControlPlaneLoadBalancer `json:"controlPlaneLoadBalancer,omitempty"`

	// IdentityRef names a Secret holding a kubeconfig for another anvil control plane: the
	// provider then creates and watches the cluster's anvil Machines there (after a
	// `clusterctl move`, say, while the pools and servers stay where they are). Empty means
	// this cluster's own anvil. Once set it cannot be changed or removed, since the
	// cluster's anvil Machines live where it points.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// FailureDomainLabel is the MachinePool label whose values are the cluster's failure
	// domains: a Machine placed in failure domain "a" only goes to pools labelled
	// <failureDomainLabel>=a.
	// +optional
	// +kubebuilder:default="topology.kubernetes.io/zone"
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="failureDomainLabel must be a label key, such as topology.kubernetes.io/zone"
	FailureDomainLabel string `json:"failureDomainLabel,omitempty"`
}

// ControlPlaneLoadBalancer is the load balancer anvil makes for a cluster's API servers.
type ControlPlaneLoadBalancer struct {
	// Network is the segment network of the pools that the control-plane machines have a NIC
	// on (their AnvilMachineTemplate's networkInterfaces name it).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Network string `json:"network"`
}

// IdentityReference names a Secret, in the AnvilCluster's namespace, holding a kubeconfig for
// another anvil control plane. The kubeconfig's current context names the namespace there in
// which the provider creates anvil Machines; its credentials should reach that namespace only.
type IdentityReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="identityRef.name must be a Secret name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`

	// Key of the kubeconfig in the Secret's data: "value" by default, as in Cluster API's
	// own kubeconfig Secrets.
	// +optional
	// +kubebuilder:default=value
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="identityRef.key must be a Secret data key: letters, digits, '-', '_' and '.'"
	Key string `json:"key,omitempty"`
}

// AnvilClusterStatus is what the provider observes of the cluster.
type AnvilClusterStatus struct {
	// Initialization is what Cluster API waits for before it creates machines.
	// +optional
	Initialization AnvilClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// FailureDomains are the values of failureDomainLabel on the pools the cluster may use.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// ControlPlaneLoadBalancer is the LoadBalancer made for spec.controlPlaneLoadBalancer, as
	// it reports itself.
	// +optional
	ControlPlaneLoadBalancer *ControlPlaneLoadBalancerStatus `json:"controlPlaneLoadBalancer,omitempty"`

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

// ControlPlaneLoadBalancerStatus names the cluster's LoadBalancer and where the machines on
// its segment reach it.
type ControlPlaneLoadBalancerStatus struct {
	// Name of the LoadBalancer, in the namespace of the cluster's anvil Machines.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// SegmentEndpoint is where the machines on the segment reach it: each node forwards
	// spec.controlPlaneEndpoint's address, on itself, to there.
	// +optional
	SegmentEndpoint clusterv1.APIEndpoint `json:"segmentEndpoint,omitempty,omitzero"`
}

// AnvilClusterInitializationStatus is the part of the status Cluster API's contract reads.
// +kubebuilder:validation:MinProperties=1
type AnvilClusterInitializationStatus struct {
	// Provisioned is true once the cluster's infrastructure is ready for machines.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// AnvilCluster is the infrastructure of one Cluster API cluster on anvil.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvilclusters,shortName=acl,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.controlPlaneEndpoint) || (has(self.spec.controlPlaneEndpoint) && self.spec.controlPlaneEndpoint == oldSelf.spec.controlPlaneEndpoint)",message="spec.controlPlaneEndpoint cannot be changed once set: the workload cluster's certificates and kubeconfigs name it; create a new cluster for a new endpoint"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.controlPlaneLoadBalancer) || (has(self.spec.controlPlaneLoadBalancer) && self.spec.controlPlaneLoadBalancer == oldSelf.spec.controlPlaneLoadBalancer)",message="spec.controlPlaneLoadBalancer cannot be changed or removed once set: the cluster's endpoint is its LoadBalancer's"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.identityRef) || (has(self.spec.identityRef) && self.spec.identityRef == oldSelf.spec.identityRef)",message="spec.identityRef cannot be changed or removed once set: the cluster's anvil Machines live in the control plane it names; rotate the credentials inside the Secret instead"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:default={}
	Spec   AnvilClusterSpec   `json:"spec,omitempty"`
	Status AnvilClusterStatus `json:"status,omitempty"`
}

// AnvilClusterList is a list of AnvilClusters.
// +kubebuilder:object:root=true
type AnvilClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilCluster{}, &AnvilClusterList{})
}
