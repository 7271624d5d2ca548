package mri

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// HostSelectorToMRI puts a Machine's spec.hostSelector on a runtime spec: matchLabels and
// matchExpressions both, since a runtime that saw only the labels would place a machine
// on Hosts its expressions exclude. A selector apimachinery cannot parse is an error
// naming what to fix; nothing is set then.
func HostSelectorToMRI(sel *metav1.LabelSelector, spec *mriv1alpha1.MachineSpec) error {
	if sel == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return fmt.Errorf("spec.hostSelector: %w", err)
	}
	spec.HostSelector = sel.MatchLabels
	spec.HostSelectorExpressions = nil
	for _, e := range sel.MatchExpressions {
		spec.HostSelectorExpressions = append(spec.HostSelectorExpressions,
			&mriv1alpha1.LabelSelectorRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
	}
	return nil
}

// HostSelector is the runtime spec's host selector, parsed by apimachinery: everything
// when the spec sets none. A runtime refuses a spec whose selector is an error
// (ValidateCreate does), never treating it as "no selector".
func HostSelector(spec *mriv1alpha1.MachineSpec) (labels.Selector, error) {
	sel := &metav1.LabelSelector{MatchLabels: spec.GetHostSelector()}
	for _, e := range spec.GetHostSelectorExpressions() {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.GetKey(), Operator: metav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("spec.host_selector: %w", err)
	}
	return s, nil
}
