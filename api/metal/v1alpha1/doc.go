// Package v1alpha1 holds the metal.anvil.dev/v1alpha1 API: the infrastructure side of bare
// metal. Host is one server and its BMC, HardwareData what inspection found on it, and
// HostPolicy which tenant namespaces may have the Hosts of a namespace.
//
// Tenants never read these kinds in the infrastructure namespace; the metal runtime gives
// a tenant a read-only copy of its server's HardwareData in the Machine's own namespace.
//
// +kubebuilder:object:generate=true
// +groupName=metal.anvil.dev
package v1alpha1
