package mri

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// A Machine's hostSelector selects on the runtime's side exactly the Hosts it selects in
// Kubernetes: labels and expressions both survive the trip.
func TestHostSelectorRoundTrip(t *testing.T) {
	hosts := []labels.Set{{}, {"tier": "reserved"}, {"tier": "general"}, {"tier": "general", "gpu": "a100"}, {"rack": "1", "tier": "general"}}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		// says is part of the error for a selector that does not parse.
		says string
	}{
		{"none", nil, ""},
		{"empty", &metav1.LabelSelector{}, ""},
		{"labels", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "general"}}, ""},
		{"every operator", &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "1"}, MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"general", "batch"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"reserved"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "gpu", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}, ""},
		{"NotIn alone", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"reserved"}}}}, ""},
		{"unknown operator", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Lacks", Values: []string{"reserved"}}}}, `spec.hostSelector: "Lacks" is not a valid label selector operator`},
		{"Exists with values", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}}}, "spec.hostSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &mriv1alpha1.MachineSpec{}
			err := HostSelectorToMRI(tc.sel, spec)
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("HostSelectorToMRI = %v, want an error saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := HostSelector(spec)
			if err != nil {
				t.Fatal(err)
			}
			want := labels.Everything()
			if tc.sel != nil {
				want, _ = metav1.LabelSelectorAsSelector(tc.sel)
			}
			for _, h := range hosts {
				if got.Matches(h) != want.Matches(h) {
					t.Errorf("Host labelled %v: runtime's selector %q says %v, the Machine's %q says %v", h, got, got.Matches(h), want, want.Matches(h))
				}
			}
		})
	}
}
