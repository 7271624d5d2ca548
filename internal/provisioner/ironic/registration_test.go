package ironic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func TestDriverFor(t *testing.T) {
	creds := provisioner.Registration{Username: "root", Password: "pw"}
	for _, tc := range []struct {
		addr     string
		insecure bool
		driver   string
		info     map[string]any
	}{
		{"fake://h1", false, "fake-hardware", map[string]any{}},
		{"redfish://10.0.0.1/redfish/v1/Systems/1", true, "redfish", map[string]any{
			"redfish_address": "https://10.0.0.1", "redfish_system_id": "/redfish/v1/Systems/1",
			"redfish_username": "root", "redfish_password": "pw", "redfish_verify_ca": false, "config_via_removable": true}},
		{"redfish+http://127.0.0.1:8000/redfish/v1/Systems/abc/", false, "redfish", map[string]any{
			"redfish_address": "http://127.0.0.1:8000", "redfish_system_id": "/redfish/v1/Systems/abc",
			"redfish_username": "root", "redfish_password": "pw", "config_via_removable": true}},
		{"redfish://bmc.example", false, "redfish", map[string]any{
			"redfish_address": "https://bmc.example", "redfish_username": "root", "redfish_password": "pw", "config_via_removable": true}},
		{"ipmi://10.0.0.2", false, "ipmi", map[string]any{
			"ipmi_address": "10.0.0.2", "ipmi_port": "623", "ipmi_username": "root", "ipmi_password": "pw"}},
		{"ipmi://10.0.0.2:6230", false, "ipmi", map[string]any{
			"ipmi_address": "10.0.0.2", "ipmi_port": "6230", "ipmi_username": "root", "ipmi_password": "pw"}},
	} {
		r := creds
		r.BMCAddress, r.DisableCertificateVerification = tc.addr, tc.insecure
		d, err := driverFor(r)
		if err != nil || d.Driver != tc.driver || !reflect.DeepEqual(d.DriverInfo, tc.info) {
			t.Errorf("driverFor(%s) = %+v, %v; want %s %v", tc.addr, d, err, tc.driver, tc.info)
		}
	}
	for _, bad := range []string{"", "10.0.0.1", "idrac://h", "redfish://", "ipmi://:623", "http://h"} {
		if _, err := driverFor(provisioner.Registration{BMCAddress: bad}); !errors.Is(err, provisioner.ErrInvalid) {
			t.Errorf("driverFor(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestRegistrationHash(t *testing.T) {
	r := provisioner.Registration{Name: "n", BMCAddress: "redfish://h/s", Username: "u", Password: "p",
		BootMACAddress: "AA:BB:CC:DD:EE:FF", Architecture: "amd64"}
	d, _ := driverFor(r)
	h := registrationHash("key", d, r)
	r2 := r
	r2.BootMACAddress = "aa:bb:cc:dd:ee:ff"
	if registrationHash("key", d, r2) != h {
		t.Error("the MAC's case changed the hash")
	}
	r2.Password = "p2"
	d2, _ := driverFor(r2)
	if registrationHash("key", d2, r2) == h {
		t.Error("a new BMC password did not change the hash")
	}
	if registrationHash("other", d, r) == h {
		t.Error("the hash does not depend on the key")
	}
}

func TestArch(t *testing.T) {
	for goarch, ironic := range map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le"} {
		if ironicArch(goarch) != ironic || goArch(ironic) != goarch {
			t.Errorf("%s <-> %s does not round-trip", goarch, ironic)
		}
	}
}
