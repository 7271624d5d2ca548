package provisioner

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// powerError is the text of a failed power change as Ironic reports it: nothing to cut.
const powerError = "Failed to change power state to 'power on' by 'power on'. Error: the server's QEMU did not start"

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		msg     string
		secrets []string
		want    string
	}{
		{powerError, nil, powerError},
		{"Failed to change power state: hunter22 refused", []string{"hunter22"}, "Failed to change power state: ****** refused"},
		{"redfish://admin:hunter22@10.0.0.5/redfish/v1/Systems/1 answered 500", nil,
			"redfish://******@10.0.0.5/redfish/v1/Systems/1 answered 500"},
		{"POST https://root@bmc.example/redfish/v1: 401", nil, "POST https://******@bmc.example/redfish/v1: 401"},
		{"driver_info {'redfish_username': 'admin', 'redfish_password': 'hunter22'}", nil,
			"driver_info {'redfish_username': 'admin', 'redfish_password': '******'}"},
		{`{"ipmi_password": "hunter22", "ipmi_address": "10.0.0.5"}`, nil, `{"ipmi_password": "******", "ipmi_address": "10.0.0.5"}`},
		{"ipmitool -U admin -P x password=hunter22&user=admin", nil, "ipmitool -U admin -P x password=******&user=admin"},
		{"an email user@example.com is no URL", nil, "an email user@example.com is no URL"},
		{"a short secret ab stays: ab", []string{"ab"}, "a short secret ab stays: ab"},
	} {
		if got := Redact(tc.msg, tc.secrets...); got != tc.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", tc.msg, got, tc.want)
		}
	}
}

// Whatever a provisioner's message says around it, the password given and a URL's user
// information never come out.
func TestRedactProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := rapid.StringMatching(`[A-Za-z0-9!#%+,:;=?~-]{3,20}`).Draw(t, "secret")
		user := rapid.StringMatching(`[a-z]{1,8}`).Draw(t, "user")
		parts := rapid.SliceOf(rapid.SampledFrom([]string{
			secret, " ", ": ", "redfish://" + user + ":" + secret + "@10.0.0.5/redfish/v1", "ipmi://" + user + "@bmc",
			"password=" + secret, "'redfish_password': '" + secret + "'", "Failed to change power state", "Error:", "\n",
		})).Draw(t, "parts")
		msg := strings.Join(parts, "")
		got := Redact(msg, secret)
		if strings.Contains(got, secret) {
			t.Fatalf("Redact(%q) = %q keeps the secret", msg, got)
		}
		if strings.Contains(got, "://"+user+"@") || strings.Contains(got, "://"+user+":") {
			t.Fatalf("Redact(%q) = %q keeps a URL's user", msg, got)
		}
		if Redact(got, secret) != got {
			t.Fatalf("Redact is not idempotent on %q", got)
		}
	})
}
