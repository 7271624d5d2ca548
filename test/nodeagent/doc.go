// Package nodeagent is the work of anvil-node-agent, a small static program a guest of the
// test OS runs to become a Node of a workload cluster, as a kubelet would: kubelet-style
// TLS bootstrap with a bootstrap token (a certificate request for
// kubernetes.io/kube-apiserver-client-kubelet, CN system:node:<name>, O system:nodes, that
// the cluster's kube-controller-manager approves and signs), then, as that node, it creates
// its Node (spec.providerID, the kubernetes.io/arch, os and hostname labels), posts Ready and
// the pressure conditions, and keeps them fresh: it renews its Lease in kube-node-lease and
// posts its status again whenever the Node is not what it reported (the node lifecycle
// controller marked it NotReady) or its status interval passed.
//
// It runs no Pods (the Node's allocatable pods are 0): it stands for a kubelet in the
// Cluster API tests, where the test OS's busybox cannot speak HTTPS. A real image runs a
// kubelet from its bootstrap data instead (docs/capi.md). It is a test program: no product
// binary or image imports or carries it.
//
// It talks to the apiserver with net/http and the k8s.io/api types, not client-go: client-go's
// scheme makes the binary 25 MB instead of 10, and the guest boots it under emulation.
package nodeagent
