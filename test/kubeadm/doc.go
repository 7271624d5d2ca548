// Package kubeadm tests Kubernetes on anvil Machines with kubeadm (docs/kubeadm.md): the node
// image (make node-image) booted on anvil dev's QEMU pool pulls the control-plane images
// (make kube-images) from anvil dev's registry, as a mirror of registry.k8s.io, and kubeadm
// makes a control plane in the guest; the test asks the guest's own kubelet, containerd and
// kubectl how it went. It is in make test's heavy lane: it boots a TCG guest.
package kubeadm
