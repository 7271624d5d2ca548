// Package e2e drives anvil as a user does: the built `anvil` binary, real etcd,
// kube-apiserver and kubectl, and the files on disk they leave behind.
package e2e
