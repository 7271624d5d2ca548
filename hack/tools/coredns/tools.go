//go:build tools

// Package coredns pins the CoreDNS that the kube-images' coredns image runs (hack/kubeimages).
package coredns

import _ "github.com/coredns/coredns"
