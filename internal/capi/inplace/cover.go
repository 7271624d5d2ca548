package inplace

import (
	"encoding/json"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// JSON pointers of the one field anvil updates in place, into the objects Cluster API sends:
// an AnvilMachine and an AnvilMachineTemplate.
const (
	MachineImagePath  = "/spec/image"
	TemplateImagePath = "/spec/template/spec/image"
)

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

// CanUpdateMachine is CanUpdateMachineSet for one machine (a control plane's): the JSON patch
// on the current AnvilMachine covering a change of its image, nothing else.
func CanUpdateMachine(current, desired infrav1.AnvilMachineSpec) runtimehooksv1.Patch {
	return imagePatch(MachineImagePath, current.Image, desired.Image)
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
