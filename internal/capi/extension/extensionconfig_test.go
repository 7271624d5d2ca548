package extension

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/yaml"
)

func TestWriteExtensionConfig(t *testing.T) {
	dir := t.TempDir()
	if err := EnsureServingCert(dir, "127.0.0.1:9444"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "extensionconfig.yaml")
	if err := WriteExtensionConfig(out, "anvil", "127.0.0.1:9444", dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var ec runtimev1.ExtensionConfig
	if err := yaml.UnmarshalStrict(raw, &ec); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	crt, _ := os.ReadFile(filepath.Join(dir, CertFile))
	if ec.APIVersion != "runtime.cluster.x-k8s.io/v1beta2" || ec.Kind != "ExtensionConfig" || ec.Name != "anvil" ||
		ec.Spec.ClientConfig.URL != "https://127.0.0.1:9444" || string(ec.Spec.ClientConfig.CABundle) != string(crt) {
		t.Fatalf("ExtensionConfig:\n%s", raw)
	}
	// A second start keeps the certificate the ExtensionConfig trusts.
	if err := EnsureServingCert(dir, "127.0.0.1:9444"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, CertFile)); string(again) != string(crt) {
		t.Fatal("EnsureServingCert replaced an existing certificate")
	}
}

func TestExtensionConfigRefusesWhatClusterAPICannotUse(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	for _, tc := range []struct {
		name, ecName, address, msg string
		ca                         []byte
	}{
		{"a dotted name", "anvil.dev", "127.0.0.1:9444", "splits handler names on dots", ca},
		{"no port", "anvil", "127.0.0.1", "HOST:PORT", ca},
		{"the wildcard", "anvil", "0.0.0.0:9444", "wildcard", ca},
		{"no host", "anvil", ":9444", "HOST:PORT", ca},
		{"no caBundle", "anvil", "127.0.0.1:9444", "caBundle", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ExtensionConfig(tc.ecName, tc.address, tc.ca)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want one saying %q", err, tc.msg)
			}
		})
	}
}
