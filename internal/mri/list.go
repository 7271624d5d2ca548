package mri

import (
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Lists reports whether ListMachines with req lists m: only the machine req.id names,
// when it names one, and only machines carrying every label of req.label_selector (an
// empty selector matches every machine).
func Lists(req *mriv1alpha1.ListMachinesRequest, m *mriv1alpha1.Machine) bool {
	if req.GetId() != "" && m.GetMetadata().GetId() != req.GetId() {
		return false
	}
	labels := m.GetMetadata().GetLabels()
	for k, v := range req.GetLabelSelector() {
		if labels[k] != v {
			return false
		}
	}
	return true
}
