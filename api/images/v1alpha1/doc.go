// Package v1alpha1 holds the images.anvil.dev/v1alpha1 API: OS image builds. An OSImage is
// the recipe a user edits (a base OS image, Containerfiles, context files, an output); each
// distinct set of its per-architecture inputs becomes one immutable OSImageBuild, whose
// status tracks every architecture separately. Builds run natively as anvil Machines of
// their architecture; the result is one multi-architecture OCI image index.
//
// +kubebuilder:object:generate=true
// +groupName=images.anvil.dev
package v1alpha1
