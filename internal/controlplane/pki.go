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
// extraNames are more names (IP addresses or DNS names) the serving certificate must be
// valid for; one made before without them is made again.
func (p pki) ensure(now time.Time, extraNames []string) error {
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
	if !exists(p.servingCert()) || !exists(p.servingKey()) || !p.servingCovers(extraNames) {
		if err := p.writeServing(now, extraNames); err != nil {
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
	return newCA(p.caCert(), p.caKey(), "anvil-dev-ca", now)
}

func (p pki) writeServing(now time.Time, extraNames []string) error {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)},
	}
	addNames(tmpl, extraNames)
	return issue(p.caCert(), p.caKey(), p.servingCert(), p.servingKey(), tmpl, now)
}

// addNames makes tmpl valid for each name: an IP address or a DNS name.
func addNames(tmpl *x509.Certificate, names []string) {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
}

// WriteServingCert writes into dir a new CA (ca.crt, ca.key) and a serving certificate for
// names signed by it (certFile and keyFile, in dir), and returns the CA's certificate (PEM)
// for the server's clients to trust. It is the key material of another local server than the
// apiserver: each Cluster API manager's webhook server (internal/clusterapi).
func WriteServingCert(dir, certFile, keyFile string, names []string, now time.Time) ([]byte, error) {
	if len(names) == 0 {
		return nil, errors.New("a serving certificate needs at least one name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := newCA(caCert, caKey, "anvil-serving-ca", now); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	addNames(tmpl, names)
	if err := issue(caCert, caKey, filepath.Join(dir, certFile), filepath.Join(dir, keyFile), tmpl, now); err != nil {
		return nil, err
	}
	return os.ReadFile(caCert)
}

// servingCovers reports whether the serving certificate on disk is valid for every name.
func (p pki) servingCovers(names []string) bool {
	der, err := readPEM(p.servingCert(), "CERTIFICATE")
	if err != nil {
		return false
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return false
	}
	for _, n := range names {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// etcd's key material lives in pki/etcd and is made anew at every start: only the
// apiserver started beside it holds a client certificate, and a copy taken of an earlier
// one stops working at the next start.
func (p pki) etcdDir() string        { return filepath.Join(p.dir, "etcd") }
func (p pki) etcdCACert() string     { return filepath.Join(p.etcdDir(), "ca.crt") }
func (p pki) etcdCAKey() string      { return filepath.Join(p.etcdDir(), "ca.key") }
func (p pki) etcdCert() string       { return filepath.Join(p.etcdDir(), "etcd.crt") }
func (p pki) etcdKey() string        { return filepath.Join(p.etcdDir(), "etcd.key") }
func (p pki) etcdClientCert() string { return filepath.Join(p.etcdDir(), "apiserver-etcd-client.crt") }
func (p pki) etcdClientKey() string  { return filepath.Join(p.etcdDir(), "apiserver-etcd-client.key") }

// writeEtcd makes etcd's CA, etcd's own certificate (serving clients and its peer port,
// on loopback) and the apiserver's client certificate.
func (p pki) writeEtcd(now time.Time) error {
	if err := os.MkdirAll(p.etcdDir(), 0o700); err != nil {
		return err
	}
	if err := newCA(p.etcdCACert(), p.etcdCAKey(), "anvil-dev-etcd-ca", now); err != nil {
		return err
	}
	if err := issue(p.etcdCACert(), p.etcdCAKey(), p.etcdCert(), p.etcdKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, // peers are both
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, now); err != nil {
		return err
	}
	return issue(p.etcdCACert(), p.etcdCAKey(), p.etcdClientCert(), p.etcdClientKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
}

// The front proxy's key material (pki/front-proxy), made anew at every start like etcd's:
// kube-apiserver presents the client certificate when it passes a request on to an
// aggregated API server (anvil's console server), naming the user in X-Remote-* headers;
// the aggregated server trusts those headers only under a certificate of this CA, which
// kube-apiserver publishes in kube-system/extension-apiserver-authentication.
func (p pki) frontProxyDir() string        { return filepath.Join(p.dir, "front-proxy") }
func (p pki) frontProxyCACert() string     { return filepath.Join(p.frontProxyDir(), "ca.crt") }
func (p pki) frontProxyCAKey() string      { return filepath.Join(p.frontProxyDir(), "ca.key") }
func (p pki) frontProxyClientCert() string { return filepath.Join(p.frontProxyDir(), "client.crt") }
func (p pki) frontProxyClientKey() string  { return filepath.Join(p.frontProxyDir(), "client.key") }

// frontProxyClientName is the front proxy client certificate's common name, the one
// name aggregated servers accept (--requestheader-allowed-names).
const frontProxyClientName = "front-proxy-client"

func (p pki) writeFrontProxy(now time.Time) error {
	if err := os.MkdirAll(p.frontProxyDir(), 0o700); err != nil {
		return err
	}
	if err := newCA(p.frontProxyCACert(), p.frontProxyCAKey(), "anvil-dev-front-proxy-ca", now); err != nil {
		return err
	}
	return issue(p.frontProxyCACert(), p.frontProxyCAKey(), p.frontProxyClientCert(), p.frontProxyClientKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
}

// newCA writes a self-signed CA certificate and its key.
func newCA(certPath, keyPath, name string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
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
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der)
}

// issue writes a certificate for a new key, signed by the CA at caCert and caKey: tmpl
// gives its names and extended key usages, issue the rest.
func issue(caCert, caKey, certPath, keyPath string, tmpl *x509.Certificate, now time.Time) error {
	ca, signer, err := loadCA(caCert, caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.AddDate(10, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, signer)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der)
}

func loadCA(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certDER, err := readPEM(certPath, "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := readPEM(keyPath, "EC PRIVATE KEY")
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
