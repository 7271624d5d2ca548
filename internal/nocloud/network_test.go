package nocloud

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestNetworkConfigNamesEveryNICByItsMAC(t *testing.T) {
	raw := NetworkConfig([]Interface{
		{Name: "eth0", MAC: "52:54:00:AA:BB:CC"},
		{Name: "cluster", MAC: "52:54:00:00:00:01"},
		{Name: "a-name-longer-than-linux-takes", MAC: "52:54:00:00:00:02"},
	})
	var got struct {
		Version   int `json:"version"`
		Ethernets map[string]struct {
			Match   map[string]string `json:"match"`
			SetName string            `json:"set-name"`
			DHCP4   bool              `json:"dhcp4"`
		} `json:"ethernets"`
	}
	if err := yaml.UnmarshalStrict(raw, &got); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if got.Version != 2 || len(got.Ethernets) != 3 {
		t.Fatalf("got %+v from\n%s", got, raw)
	}
	want := map[string][2]string{
		"eth0":                           {"52:54:00:aa:bb:cc", "eth0"},
		"cluster":                        {"52:54:00:00:00:01", "cluster"},
		"a-name-longer-than-linux-takes": {"52:54:00:00:00:02", InterfaceName("a-name-longer-than-linux-takes")},
	}
	for name, w := range want {
		e := got.Ethernets[name]
		if !reflect.DeepEqual(e.Match, map[string]string{"macaddress": w[0]}) || e.SetName != w[1] || !e.DHCP4 {
			t.Errorf("%s: %+v, want MAC %s, name %s, DHCP", name, e, w[0], w[1])
		}
	}
	if n := InterfaceName("a-name-longer-than-linux-takes"); len(n) > 15 || !strings.HasPrefix(n, "a-name-lon") {
		t.Errorf("InterfaceName of a long name: %q", n)
	}
}

// A name or MAC cannot add keys (they come from the spec; the API checks them, but the
// seed must not depend on it).
func TestNetworkConfigValuesCannotInjectKeys(t *testing.T) {
	raw := NetworkConfig([]Interface{{Name: "x:\n    dhcp6: true\n  evil", MAC: "m\"\n    set-name: root"}})
	var got map[string]any
	if err := yaml.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	eths := got["ethernets"].(map[string]any)
	if len(eths) != 1 || len(got) != 2 {
		t.Fatalf("keys added:\n%s", raw)
	}
	for _, e := range eths {
		if len(e.(map[string]any)) != 3 {
			t.Errorf("keys added to an interface:\n%s", raw)
		}
	}
}
