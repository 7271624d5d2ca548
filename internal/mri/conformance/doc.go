// Package conformance is the Machine Runtime Interface test suite every runtime runs
// against itself (the fake, qemu, metal). Each test names the CONTRACT.md rule it checks.
// A runtime's own test supplies a Target, usually with Serve, which puts the runtime
// behind a real unix socket; the suite drives it only through the MRI.
package conformance
