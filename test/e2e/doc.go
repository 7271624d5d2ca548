// Package e2e drives anvil as a user does: the built `anvil` binary, real etcd,
// kube-apiserver and kubectl, and the files on disk they leave behind, where guests boot
// (QEMU pools, emulated servers, builders). test/cli has what boots none.
package e2e
