// Package capi is anvil's Cluster API infrastructure provider: one controller for
// AnvilClusters and one for AnvilMachines, each reading the objects, asking the pure
// packages internal/capi/anvilcluster and internal/capi/anvilmachine what to do, and doing
// it. `anvil manager` runs them when Cluster API's CRDs are installed (or with --capi).
package capi
