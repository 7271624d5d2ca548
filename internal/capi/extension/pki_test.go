package extension

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/pki"
)

// testCA is pki's CA with the test's failure handling.
type testCA struct{ *pki.CA }

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{ca}
}

func (ca testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	cert, err := ca.Issue(name, usage)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// write writes the CA's certificate into dir, as --capi-extension-client-ca takes it.
func (ca testCA) write(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(p, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
