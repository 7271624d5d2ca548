package v1alpha1

import "testing"

func TestRedfishSystemURL(t *testing.T) {
	for _, tc := range []struct {
		address, want string
	}{
		{"redfish://10.0.0.5/redfish/v1/Systems/1", "https://10.0.0.5/redfish/v1/Systems/1"},
		{"redfish+https://bmc:8443/redfish/v1/Systems/a", "https://bmc:8443/redfish/v1/Systems/a"},
		{"redfish+http://127.0.0.1:8000/redfish/v1/Systems/server-1", "http://127.0.0.1:8000/redfish/v1/Systems/server-1"},
		{"redfish-virtualmedia+http://bmc/redfish/v1/Systems/1", "http://bmc/redfish/v1/Systems/1"},
		{"redfish://", ""},
		{"redfish+ftp://bmc/x", ""},
		{"ipmi://10.0.0.5:623", ""},
		{"fake://server-1", ""},
		{"not a url\x7f", ""},
	} {
		u, ok := RedfishSystemURL(tc.address)
		got := ""
		if ok {
			got = u.String()
		}
		if got != tc.want {
			t.Errorf("RedfishSystemURL(%q) = %q (%v), want %q", tc.address, got, ok, tc.want)
		}
	}
}
