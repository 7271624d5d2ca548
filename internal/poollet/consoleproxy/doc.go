// Package consoleproxy is the poollet's console endpoint (api/poollet/v1alpha1,
// docs/console.md): the MRI's console calls for the Machines of the poollet's pool, over
// TLS, to callers the cluster vouches for. Each call's bearer token is checked with a
// TokenReview and its user with a SubjectAccessReview (internal/apiauth) for `get` on the pool's
// `machinepools/proxy` (as a kubelet checks `nodes/proxy`); a Machine is named by its UID
// and found in the runtime by the UID label the poollet put on it, so no caller can name
// another pool's machine or a machine by its runtime id.
package consoleproxy
