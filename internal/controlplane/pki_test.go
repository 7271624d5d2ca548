package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

// The serving certificate verifies against the CA WriteServingCert returns, for each of its
// names, as a client trusting only that CA (the apiserver calling a webhook) checks it.
func TestWriteServingCertChainsToItsCA(t *testing.T) {
	dir := t.TempDir()
	caPEM, err := WriteServingCert(dir, "tls.crt", "tls.key", []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in the returned CA %q", caPEM)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.1"}); err == nil {
		t.Error("serving certificate valid for 10.0.0.1, a name it was not made for")
	}
}
