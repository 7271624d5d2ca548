// Package fake is an in-memory Machine Runtime Interface runtime that honours the whole
// contract (api/mri/v1alpha1/CONTRACT.md): capacity admission, architectures, idempotent
// calls, generations, restarts (with a state file) and events. It adds what tests and scale
// runs need: per-step latency with jitter, and injected failures, explicit (an error
// returned) and silent (a call that succeeds but whose effect is lost).
//
// It runs no machines; it must never be used where a real machine is expected.
package fake
