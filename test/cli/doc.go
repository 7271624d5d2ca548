// Package cli drives the built `anvil` binary as a user does where no guest boots: anvil
// dev's first session and restart (the fake pool only), its refusals of a busy port and
// missing binaries, and `anvil runtime fake` with `anvil poollet` started as processes
// against it. It runs real etcd, kube-apiserver and kubectl, never QEMU or Ironic:
// hack/test.sh runs it in the light lane; test/e2e has the tests that boot guests.
package cli
