// Package harness starts one real control plane (etcd and kube-apiserver, through
// controller-runtime's envtest) for a test package, with anvil's CRDs installed, and an
// embedded OCI registry (distribution v3, in memory, on 127.0.0.1) for its images.
//
// It is also the one way a test starts any other control plane: StartAPIServer for an
// empty one (a test that installs anvil itself), and its package controlplanes for the one
// anvil dev runs (internal/controlplane: a second management cluster, a workload cluster).
//
// The binaries come from KUBEBUILDER_ASSETS or, when it is unset, the checkout's bin/
// (built by `make tools`). When they are missing the test binary fails with a message
// naming the fix; it never skips.
package harness
