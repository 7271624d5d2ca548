package v1alpha1_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

func validDataTemplate(name string) *infrav1.AnvilDataTemplate {
	return &infrav1.AnvilDataTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.AnvilDataTemplateSpec{
			Hostname: "{cluster}-worker-{index}",
			MetaData: []infrav1.MetaDataEntry{
				{Key: "anvil-index", Index: &infrav1.IndexSource{Offset: 10}},
				{Key: "role", Value: ptr.To("worker")},
				{Key: "ip", Addresses: []string{"10.0.0.10", "10.0.0.11/24", "fd00::1"}},
				{Key: "mac", Hardware: &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}},
				{Key: "disk-serial", Hardware: &infrav1.HardwareSource{Field: computev1alpha1.HardwareDiskSerialNumber, Name: "sda"}},
			},
		},
	}
}

func TestAnvilDataTemplateAcceptsEverySource(t *testing.T) {
	installed(t)
	if err := env.Client.Create(context.Background(), validDataTemplate(unique("dt-valid"))); err != nil {
		t.Fatalf("creating a valid AnvilDataTemplate: %v", err)
	}
}

func TestAnvilDataTemplateRejectsInvalid(t *testing.T) {
	installed(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*infrav1.AnvilDataTemplateSpec)
		message string
	}{
		{"unknown placeholder", func(s *infrav1.AnvilDataTemplateSpec) { s.Hostname = "{namespace}-{index}" },
			"hostname must be lowercase letters, digits, '-', '.' and the placeholders {cluster}, {machine} and {index}"},
		{"template syntax", func(s *infrav1.AnvilDataTemplateSpec) { s.Hostname = "{{ .ClusterName }}" }, "the placeholders {cluster}"},
		{"hostname with uppercase", func(s *infrav1.AnvilDataTemplateSpec) { s.Hostname = "Worker-{index}" }, "hostname must be lowercase"},
		{"entry without a source", func(s *infrav1.AnvilDataTemplateSpec) { s.MetaData = []infrav1.MetaDataEntry{{Key: "k"}} },
			"each metaData entry sets exactly one of value, index, addresses or hardware"},
		{"entry with two sources", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "k", Value: ptr.To("v"), Index: &infrav1.IndexSource{}}}
		}, "each metaData entry sets exactly one of"},
		{"key twice", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = append(s.MetaData, infrav1.MetaDataEntry{Key: "role", Value: ptr.To("other")})
		}, `spec.metaData[5]: Duplicate value: {"key":"role"}`},
		{"provider-id key", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "provider-id", Value: ptr.To("anvil://x/y")}}
		}, "metaData keys instance-id, uuid, name, hostname, local-hostname and provider-id are written by the runtime or the provider"},
		{"hostname key", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "Hostname", Value: ptr.To("x")}}
		}, "the hostname is spec.hostname"},
		{"key with a colon", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "a: b", Value: ptr.To("x")}}
		}, "metaData keys must be letters, digits"},
		{"address that is not one", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "ip", Addresses: []string{"10.0.0.1", "10.0.0.300"}}}
		}, "addresses must be IP addresses or CIDRs"},
		{"unknown hardware field", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "serial", Hardware: &infrav1.HardwareSource{Field: "SystemSerial", Name: "x"}}}
		}, `Unsupported value: "SystemSerial": supported values: "NICMACAddress", "DiskSerialNumber"`},
		{"negative offset", func(s *infrav1.AnvilDataTemplateSpec) {
			s.MetaData = []infrav1.MetaDataEntry{{Key: "i", Index: &infrav1.IndexSource{Offset: -1}}}
		}, "should be greater than or equal to 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dt := validDataTemplate(unique("dt-invalid"))
			tc.mutate(&dt.Spec)
			wantInvalid(t, "create", env.Client.Create(context.Background(), dt), tc.message)
		})
	}
}

func TestAnvilMachineDataTemplateRefCannotChange(t *testing.T) {
	installed(t)
	spec := validSpec()
	spec.DataTemplateRef = &infrav1.DataTemplateReference{Name: "workers"}
	am := anvilMachine(unique("am-dt"), spec)
	if err := env.Client.Create(context.Background(), am); err != nil {
		t.Fatal(err)
	}
	am.Spec.DataTemplateRef.Name = "others"
	wantInvalid(t, "changing dataTemplateRef", env.Client.Update(context.Background(), am), "spec.dataTemplateRef cannot be changed on an AnvilMachine")
}
