// Package v1alpha1 holds the infrastructure.cluster.x-k8s.io/v1alpha1 API: the kinds through
// which Cluster API (contract v1beta2) asks anvil for machines. An AnvilMachine is a template
// of an anvil Machine (compute.anvil.dev); AnvilCluster holds what a whole cluster shares.
//
// Every CRD of the group carries the label cluster.x-k8s.io/v1beta2: v1alpha1, which is how
// Cluster API finds the version of a kind it only knows by group and kind, and the clusterctl
// labels that let `clusterctl move` discover the kinds without `clusterctl init`.
//
// Types here carry data and schema validation only; they never call out of the process and
// hold no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
