// Package crd carries anvil's generated CustomResourceDefinitions (bases/, written by
// controller-gen) inside the binary and installs them, so `anvil dev`, `anvil install`
// and the test harness all serve exactly the schemas that are committed.
//
// It never edits a CRD: bases/ is generated and checked fresh by `make test`.
package crd
