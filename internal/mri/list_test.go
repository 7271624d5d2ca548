package mri

import (
	"testing"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestLists(t *testing.T) {
	m := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "m1", Labels: map[string]string{LabelMachineUID: "u1", "team": "a"}}}
	unlabelled := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "m2"}}
	for _, tc := range []struct {
		name string
		req  *mriv1alpha1.ListMachinesRequest
		m    *mriv1alpha1.Machine
		want bool
	}{
		{"everything", &mriv1alpha1.ListMachinesRequest{}, m, true},
		{"everything, unlabelled", &mriv1alpha1.ListMachinesRequest{}, unlabelled, true},
		{"nil request", nil, m, true},
		{"its id", &mriv1alpha1.ListMachinesRequest{Id: "m1"}, m, true},
		{"another id", &mriv1alpha1.ListMachinesRequest{Id: "m2"}, m, false},
		{"one of its labels", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"team": "a"}}, m, true},
		{"all of its labels", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"team": "a", LabelMachineUID: "u1"}}, m, true},
		{"another value", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"team": "b"}}, m, false},
		{"a label it lacks", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"zone": "1"}}, m, false},
		{"one label matches, one does not", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"team": "a", LabelMachineUID: "u2"}}, m, false},
		{"no labels", &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{"team": "a"}}, unlabelled, false},
		{"its id, another label", &mriv1alpha1.ListMachinesRequest{Id: "m1", LabelSelector: map[string]string{"team": "b"}}, m, false},
	} {
		if got := Lists(tc.req, tc.m); got != tc.want {
			t.Errorf("%s: Lists = %v, want %v", tc.name, got, tc.want)
		}
	}
}
