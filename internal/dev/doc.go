// Package dev runs a whole anvil on one machine for development and demos: a local control
// plane (etcd and kube-apiserver), anvil's CRDs, the controller manager in-process, and
// sample objects, with state kept in one directory across restarts; with Options.CAPI,
// Cluster API beside it (its managers through internal/clusterapi, anvil's provider
// in-process), for Cluster API's quick start (docs/capi.md).
//
// It is for a laptop or CI, never for a fleet: a fleet installs anvil from config/ into a
// Kubernetes cluster it already runs.
package dev
