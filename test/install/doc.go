// Package install is anvil installed into a real cluster, as a user would: a node of
// test/cluster (kubelet, containerd, kube-proxy), anvil's images (make images) in a registry
// on loopback, and kubectl apply -k of config/default and config/metal-site. The manager,
// the qemu runtime and poollet DaemonSets and the bare-metal site all run as Pods; a
// Machine boots as a QEMU guest inside the runtime's Pod, another is deployed by the Ironic
// inside the site's Pod onto an emulated server.
//
// It needs root and a machine of its own (one test/cluster node at a time): hack/test.sh
// runs it in the heavy lane.
package install
