//go:build tools

// Package capi pins the Cluster API core manager, its kubeadm bootstrap and control-plane
// providers and clusterctl that the Cluster API provider's tests and `anvil dev --capi` run
// (contract v1beta2), all from one release. Since v1.14 the core manager's main is
// sigs.k8s.io/cluster-api/core, not the module root; the kubeadm providers' mains are
// bootstrap/kubeadm and controlplane/kubeadm.
package capi

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
)
