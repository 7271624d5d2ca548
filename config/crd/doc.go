// Package crd carries anvil's generated CustomResourceDefinitions (bases/, written by
// controller-gen) inside the binary and installs them, so `anvil dev`, `anvil install`
// and the test harness all serve exactly the schemas that are committed. The Cluster API
// provider's CRDs (capi/) are carried too but installed only on request, beside Cluster API.
// Read and Apply read and install other CRDs the same way (Cluster API's, for
// internal/clusterapi).
//
// It never edits a CRD: bases/ and capi/ are generated and checked fresh by `make test`.
package crd
