package datatemplate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

func entry(key string, set func(*infrav1.MetaDataEntry)) infrav1.MetaDataEntry {
	e := infrav1.MetaDataEntry{Key: key}
	set(&e)
	return e
}

func TestRender(t *testing.T) {
	full := infrav1.AnvilDataTemplateSpec{
		Hostname: "{cluster}-w{index}",
		MetaData: []infrav1.MetaDataEntry{
			entry("anvil-index", func(e *infrav1.MetaDataEntry) { e.Index = &infrav1.IndexSource{} }),
			entry("node-number", func(e *infrav1.MetaDataEntry) { e.Index = &infrav1.IndexSource{Offset: 100} }),
			entry("role", func(e *infrav1.MetaDataEntry) { e.Value = ptr.To("worker") }),
			entry("ip", func(e *infrav1.MetaDataEntry) { e.Addresses = []string{"10.0.0.10", "10.0.0.11", "10.0.0.12"} }),
			entry("mac", func(e *infrav1.MetaDataEntry) {
				e.Hardware = &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}
			}),
			entry("serial", func(e *infrav1.MetaDataEntry) {
				e.Hardware = &infrav1.HardwareSource{Field: computev1alpha1.HardwareDiskSerialNumber, Name: "sda"}
			}),
		},
	}
	one := func(e infrav1.MetaDataEntry) infrav1.AnvilDataTemplateSpec {
		return infrav1.AnvilDataTemplateSpec{MetaData: []infrav1.MetaDataEntry{e}}
	}
	in := Input{ClusterName: "prod", MachineName: "md-0-abc", Index: 2}
	refs := []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"},
		{Key: "serial", Field: computev1alpha1.HardwareDiskSerialNumber, Name: "sda"}}
	for _, tc := range []struct {
		name     string
		template infrav1.AnvilDataTemplateSpec
		in       Input
		want     Rendered
		says     string // part of the error; "" for none
	}{
		// Hardware keys are references the runtime resolves at the first boot, in the
		// template's order, never values read here.
		{"every source", full, in, Rendered{Hostname: "prod-w2", MetaData: map[string]string{
			"anvil-index": "2", "node-number": "102", "role": "worker", "ip": "10.0.0.12"}, HardwareMetaData: refs}, ""},
		{"index 0", full, Input{ClusterName: "prod", MachineName: "md-0-abc", Index: 0}, Rendered{Hostname: "prod-w0",
			MetaData: map[string]string{"anvil-index": "0", "node-number": "100", "role": "worker", "ip": "10.0.0.10"}, HardwareMetaData: refs}, ""},
		{"hardware keys only", one(entry("mac", func(e *infrav1.MetaDataEntry) {
			e.Hardware = &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eno1"}
		})), in, Rendered{MetaData: map[string]string{}, HardwareMetaData: []computev1alpha1.HardwareMetaData{
			{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eno1"}}}, ""},
		{"empty template", infrav1.AnvilDataTemplateSpec{}, in, Rendered{MetaData: map[string]string{}}, ""},
		{"machine placeholder", infrav1.AnvilDataTemplateSpec{Hostname: "{machine}.example"}, in,
			Rendered{Hostname: "md-0-abc.example", MetaData: map[string]string{}}, ""},
		{"fixed value that a YAML writer must quote", one(entry("note", func(e *infrav1.MetaDataEntry) { e.Value = ptr.To("a: b\ninstance-id: x") })), in,
			Rendered{MetaData: map[string]string{"note": "a: b\ninstance-id: x"}}, ""},

		{"address list shorter than the index", full, Input{ClusterName: "prod", MachineName: "md-0-xyz", Index: 3}, Rendered{},
			`metaData key "ip": machine md-0-xyz has index 3 but the address list has 3 addresses (indexes 0 to 2): add addresses to the list`},
		{"unknown hardware field", one(entry("x", func(e *infrav1.MetaDataEntry) {
			e.Hardware = &infrav1.HardwareSource{Field: "SystemSerial", Name: "x"}
		})), in, Rendered{}, `metaData key "x": unknown hardware field "SystemSerial": use NICMACAddress or DiskSerialNumber`},
		{"hardware key of the runtime", one(entry("uuid", func(e *infrav1.MetaDataEntry) {
			e.Hardware = &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}
		})), in, Rendered{}, `key "uuid" is written by the runtime itself`},
		{"hardware keys count towards the 32 with the provider's", func() infrav1.AnvilDataTemplateSpec {
			var t infrav1.AnvilDataTemplateSpec
			for i := range 30 {
				t.MetaData = append(t.MetaData, entry(fmt.Sprint("k", i), func(e *infrav1.MetaDataEntry) { e.Value = ptr.To("v") }))
			}
			for i := range 2 {
				t.MetaData = append(t.MetaData, entry(fmt.Sprint("mac", i), func(e *infrav1.MetaDataEntry) {
					e.Hardware = &infrav1.HardwareSource{Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}
				}))
			}
			return t
		}(), in, Rendered{}, "metaData: 33 keys; at most 32"},
		{"unknown placeholder", infrav1.AnvilDataTemplateSpec{Hostname: "{namespace}-{index}-{{.X}}"}, in, Rendered{},
			`unknown placeholder {namespace}, {.X}: use {cluster}, {machine} and {index}`},
		{"hostname too long once filled", infrav1.AnvilDataTemplateSpec{Hostname: "{cluster}-" + strings.Repeat("a", 60)}, in, Rendered{},
			`gives "prod-aaaa`},
		{"hostname not lowercase once filled", infrav1.AnvilDataTemplateSpec{Hostname: "{cluster}-{index}"}, Input{ClusterName: "Prod", MachineName: "m"}, Rendered{},
			`gives "Prod-0" for machine m, which is not a hostname`},
		{"provider-id key", one(entry(infrav1.MetaDataProviderID, func(e *infrav1.MetaDataEntry) { e.Value = ptr.To("anvil://a/b") })), in, Rendered{},
			`metaData key "provider-id" is the provider's own`},
		{"runtime key", one(entry("instance-id", func(e *infrav1.MetaDataEntry) { e.Value = ptr.To("x") })), in, Rendered{},
			`key "instance-id" is written by the runtime itself`},
		{"entry without a source", one(infrav1.MetaDataEntry{Key: "k"}), in, Rendered{}, `metaData key "k": no source`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(&tc.template, tc.in)
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Render: %v, want an error saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got.Hostname != tc.want.Hostname || !maps.Equal(got.MetaData, tc.want.MetaData) || !slices.Equal(got.HardwareMetaData, tc.want.HardwareMetaData) {
				t.Fatalf("Render = %+v, want %+v", got, tc.want)
			}
		})
	}
}
