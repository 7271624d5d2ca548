// Package controlplane runs a local Kubernetes control plane, etcd and kube-apiserver as
// child processes, with all state (data, keys, logs, kubeconfig) in one directory so that
// stopping and starting again finds every object where it was. `anvil dev` uses it.
//
// It binds loopback addresses only, unless Config.Address names another address of this
// host for kube-apiserver (test/cluster's node address); etcd serves TLS and takes no client but the
// apiserver (a client certificate of an etcd CA made anew at every start). It refuses to
// start when its ports or its state directory are in use instead of guessing, and never
// logs the admin token.
package controlplane
