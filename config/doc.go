// Package config holds anvil's manifests as an operator applies them with kubectl apply -k:
// default/ (CRDs, admission policies, roles, the controller manager and the hypervisor
// DaemonSet), metal-site/ (a bare-metal site Pod) and capi/ (the Cluster API provider), made
// of the folders beside them; clusterctl/ holds clusterctl's metadata and the default cluster
// template of the provider's local repository (make clusterctl-repo). The Go packages below embed the same files for anvil dev and
// the tests; this package's test holds the two to each other and dry-runs the kustomizations
// against a real API server.
package config
