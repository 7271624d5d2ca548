//go:build tools

// Package kube pins the Kubernetes control-plane binaries anvil's tests, `anvil dev` and the
// side-by-side benchmarks run: kube-apiserver, kube-scheduler, kubectl and (for the workload
// clusters of the Cluster API tests) kube-controller-manager, and the node test/cluster runs
// (kubelet, kube-proxy), all built from one k8s.io/kubernetes release so every comparison
// uses the same build.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
