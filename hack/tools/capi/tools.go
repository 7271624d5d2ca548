//go:build tools

// Package capi pins the Cluster API core manager and clusterctl that the Cluster API
// provider's tests run against (contract v1beta2). Since v1.14 the core manager's main is
// sigs.k8s.io/cluster-api/core, not the module root.
package capi

import (
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/core"
)
