//go:build tools

// Package etcd pins the etcd server that backs kube-apiserver in tests and `anvil dev`.
package etcd

import _ "go.etcd.io/etcd/server/v3"
