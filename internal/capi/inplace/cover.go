package inplace

import (
	"encoding/json"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// TemplateImagePath is the JSON pointer of the one field anvil updates in place, into the
// AnvilMachineTemplate Cluster API sends.
const TemplateImagePath = "/spec/template/spec/image"

// CanUpdateMachineSet is the part of the change from the current to the desired
// AnvilMachineTemplate that anvil applies in place, as a JSON patch on the current
// template: its image, nothing else. Cluster API applies it to the current template and
// compares the result with the desired one; any difference left (a class, an architecture,
// selectors, volumes, NICs) makes it replace the machines instead. The MachineSet's and the
// bootstrap config template's changes are never covered: a new Kubernetes version or
// bootstrap config needs a new machine. An undefined Patch covers nothing.
func CanUpdateMachineSet(current, desired infrav1.AnvilMachineTemplateSpec) runtimehooksv1.Patch {
	return imagePatch(TemplateImagePath, current.Template.Spec.Image, desired.Template.Spec.Image)
}

// ControlPlaneKept is why CanUpdateMachine covers nothing. Cluster API asks it only of
// KubeadmControlPlane's machines, and a kubeadm control-plane node keeps etcd's data, the
// cluster's certificates and its static Pods on its root disk, which a reimage makes anew:
// reimaging the only control-plane machine would lose the cluster, and reimaging one of
// three would leave etcd a member that never comes back (its join token long expired).
// Replacing the machine (a new one joins before the old one leaves) is kubeadm's own way.
const ControlPlaneKept = "a control-plane machine is not reimaged in place: kubeadm keeps etcd's data and the cluster's certificates on its root disk; KubeadmControlPlane replaces it instead"

// CanUpdateMachine is KubeadmControlPlane's question about one machine: nothing is covered
// (ControlPlaneKept), so KubeadmControlPlane replaces a control-plane machine whose image
// changes, as it does for any other change.
func CanUpdateMachine(_, _ infrav1.AnvilMachineSpec) runtimehooksv1.Patch {
	return runtimehooksv1.Patch{}
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value string `json:"value"`
}

// imagePatch sets path to desired when the image changes to another non-empty one. It is
// an "add", which RFC 6902 makes a replacement of an existing member and which still
// applies if the current object lacks the field.
func imagePatch(path, current, desired string) runtimehooksv1.Patch {
	if desired == "" || desired == current {
		return runtimehooksv1.Patch{}
	}
	raw, err := json.Marshal([]patchOp{{Op: "add", Path: path, Value: desired}})
	if err != nil { // a struct of strings always marshals
		return runtimehooksv1.Patch{}
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONPatchType, Patch: raw}
}
