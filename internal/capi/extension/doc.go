// Package extension serves anvil's Cluster API in-place update extension (Runtime SDK,
// hooks.runtime.cluster.x-k8s.io/v1alpha1): discovery, CanUpdateMachineSet,
// CanUpdateMachine and UpdateMachine, over HTTPS to callers holding a client certificate
// signed by the CA it is given (Cluster API's --runtime-extension-client-cert-file), so
// that only Cluster API asks for reimages.
//
// The answers are internal/capi/inplace's: a new image is covered, and carried out by the
// AnvilMachine controller, which sets the anvil Machine's image; UpdateMachine only reads
// the AnvilMachine and its anvil Machine and reports. The extension must never write an
// anvil Machine (one writer of its spec), and never panic on a request: a body it cannot
// read gets a Failure response saying why.
package extension
