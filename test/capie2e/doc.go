// Package capie2e runs Cluster API's own end-to-end specs (sigs.k8s.io/cluster-api/test/e2e)
// against anvil: a nested module, so the specs' dependencies (Ginkgo, kind's and Docker's
// client packages the framework imports) stay out of anvil's go.mod. The bootstrap
// (management) cluster is anvil dev --capi: the harness's kube-apiserver and etcd, the Cluster
// API core, kubeadm bootstrap and KubeadmControlPlane managers and anvil's provider as
// processes, QEMU pools of both architectures — no kind, no Docker (docs/capi.md, "Cluster
// API's e2e specs").
package capie2e
