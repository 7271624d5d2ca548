// Package v1alpha1 holds the compute.anvil.dev/v1alpha1 API: the kinds a user writes to get
// machines (Machine, MachineClass, MachinePool, Volume, NetworkInterface).
//
// Types here carry data and schema validation only; they never call out of the process and
// hold no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=compute.anvil.dev
package v1alpha1
