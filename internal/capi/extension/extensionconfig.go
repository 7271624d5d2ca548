package extension

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/yaml"
)

// ExtensionConfig registers the extension with Cluster API: name (a DNS-1123 label, since
// Cluster API splits handler names on dots), the URL https://<address> it calls, and
// caBundle, the PEM it verifies the serving certificate with (tls.crt of a self-signed
// certificate EnsureServingCert made, or its CA). address is what Cluster API dials: an IP
// literal needs that IP in the certificate.
func ExtensionConfig(name, address string, caBundle []byte) (*runtimev1.ExtensionConfig, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("ExtensionConfig name %q: %v (Cluster API splits handler names on dots)", name, errs)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("the extension's address must be HOST:PORT Cluster API can dial, not %q", address)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("the extension's address %q is the wildcard: give the address Cluster API dials (e.g. 127.0.0.1:%s)", address, port)
	}
	if len(caBundle) == 0 {
		return nil, fmt.Errorf("the ExtensionConfig needs a caBundle: the PEM that verifies the extension's serving certificate")
	}
	return &runtimev1.ExtensionConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: runtimev1.GroupVersion.String(), Kind: "ExtensionConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{
			URL:      "https://" + net.JoinHostPort(host, port),
			CABundle: caBundle,
		}},
	}, nil
}

// WriteExtensionConfig writes to path, as YAML, the ExtensionConfig of the extension served
// at address with the self-signed certificate in certDir (its tls.crt is the caBundle).
func WriteExtensionConfig(path, name, address, certDir string) error {
	caBundle, err := os.ReadFile(filepath.Join(certDir, CertFile))
	if err != nil {
		return fmt.Errorf("reading the extension's serving certificate: %w", err)
	}
	ec, err := ExtensionConfig(name, address, caBundle)
	if err != nil {
		return err
	}
	raw, err := yaml.Marshal(ec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
