package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnvilClusterIdentitySpec allows the AnvilClusters of some namespaces to make their anvil
// Machines in one namespace of the control plane their identityRef kubeconfig names.
type AnvilClusterIdentitySpec struct {
	// RemoteNamespace is the namespace an identity kubeconfig's current context names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	RemoteNamespace string `json:"remoteNamespace"`

	// AllowedNamespaces are the namespaces here whose AnvilClusters may use an identity for
	// RemoteNamespace.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	AllowedNamespaces []string `json:"allowedNamespaces"`
}

// AnvilClusterIdentity is an infrastructure admin's permission for AnvilClusters of the
// namespaces it lists to use identityRef kubeconfigs whose context names another namespace
// (as after a `clusterctl move`, where the Cluster's namespace and the anvil Machines'
// namespace differ). An AnvilCluster's own namespace needs none. Cluster-scoped, so tenants,
// who write only their namespaces, cannot grant it to themselves. No contract label: Cluster
// API never references it, and `clusterctl move` leaves it to each management cluster's admin.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=anvilclusteridentities,scope=Cluster,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:printcolumn:name="Remote namespace",type=string,JSONPath=`.spec.remoteNamespace`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilClusterIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnvilClusterIdentitySpec `json:"spec"`
}

// AnvilClusterIdentityList is a list of AnvilClusterIdentities.
// +kubebuilder:object:root=true
type AnvilClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilClusterIdentity `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilClusterIdentity{}, &AnvilClusterIdentityList{})
}
