package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of a local control plane. It is generated once and reused, so a
// kubeconfig handed out before a restart keeps working after it.
type pki struct {
	dir string
}

func (p pki) caCert() string      { return filepath.Join(p.dir, "ca.crt") }
func (p pki) caKey() string       { return filepath.Join(p.dir, "ca.key") }
func (p pki) servingCert() string { return filepath.Join(p.dir, "apiserver.crt") }
func (p pki) servingKey() string  { return filepath.Join(p.dir, "apiserver.key") }
func (p pki) saKey() string       { return filepath.Join(p.dir, "service-account.key") }
func (p pki) saPub() string       { return filepath.Join(p.dir, "service-account.pub") }
func (p pki) tokens() string      { return filepath.Join(p.dir, "tokens.csv") }
func (p pki) adminToken() string  { return filepath.Join(p.dir, "admin.token") }

// ensure creates whatever key material is missing. Files are written 0600 and only after
// they are complete, so a crash mid-way leaves nothing half-written to be trusted later.
func (p pki) ensure(now time.Time) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if !exists(p.caCert()) || !exists(p.caKey()) {
		// A new CA invalidates the serving certificate signed by the old one.
		_ = os.Remove(p.servingCert())
		if err := p.writeCA(now); err != nil {
			return fmt.Errorf("creating the cluster CA: %w", err)
		}
	}
	if !exists(p.servingCert()) || !exists(p.servingKey()) {
		if err := p.writeServing(now); err != nil {
			return fmt.Errorf("creating the apiserver serving certificate: %w", err)
		}
	}
	if !exists(p.saKey()) || !exists(p.saPub()) {
		if err := p.writeServiceAccountKeys(); err != nil {
			return fmt.Errorf("creating the service-account signing key: %w", err)
		}
	}
	if !exists(p.adminToken()) || !exists(p.tokens()) {
		if err := p.writeAdminToken(); err != nil {
			return fmt.Errorf("creating the admin token: %w", err)
		}
	}
	return nil
}

func (p pki) writeCA(now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "anvil-dev-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(p.caKey(), key); err != nil {
		return err
	}
	return writePEM(p.caCert(), "CERTIFICATE", der)
}

func (p pki) writeServing(now time.Time) error {
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(p.servingKey(), key); err != nil {
		return err
	}
	return writePEM(p.servingCert(), "CERTIFICATE", der)
}

func (p pki) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certDER, err := readPEM(p.caCert(), "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := readPEM(p.caKey(), "EC PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func (p pki) writeServiceAccountKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeKey(p.saKey(), key); err != nil {
		return err
	}
	return writePEM(p.saPub(), "PUBLIC KEY", pub)
}

// writeAdminToken writes a random bearer token for the user "anvil-admin" in the group
// system:masters, the one identity of a dev control plane.
func (p pki) writeAdminToken() error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	token := hex.EncodeToString(b)
	if err := writeFile(p.tokens(), []byte(fmt.Sprintf("%s,anvil-admin,anvil-admin,\"system:masters\"\n", token))); err != nil {
		return err
	}
	return writeFile(p.adminToken(), []byte(token))
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func readPEM(path, typ string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != typ {
		return nil, fmt.Errorf("%s holds no %s block", path, typ)
	}
	return block.Bytes, nil
}

// writeFile writes through a temporary file and a rename, so readers never see a partial file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
