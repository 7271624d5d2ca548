package security

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/anvil-dev/anvil/test/harness/controlplanes"
)

// The attack: anything on the host of `anvil dev` (another user, a guest reaching the
// host's loopback) reads every Secret straight from etcd's client port, past the
// apiserver: in plain HTTP, in TLS without a client certificate, or with a certificate of
// its own making. etcd refuses each; the apiserver's certificate still reads.
func TestEtcdOfAnvilDevNeedsAClientCertificate(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplanes.Start(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const marker = "the-tenants-secret-3f9a"
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Data: map[string][]byte{"password": []byte(marker)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	caFile, certFile, keyFile := cp.EtcdClientFiles()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	apiserverCert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// tlsClient presents cert (when not nil) whatever CAs etcd says it accepts.
	tlsClient := func(cert *tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			}}}}
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	tlsURL := cp.EtcdURL()
	plainURL := "http://" + strings.TrimPrefix(tlsURL, "https://")

	attempts := []struct {
		what   string
		client *http.Client
		url    string
		reads  bool
	}{
		{"plain HTTP", plain, plainURL, false},
		{"TLS without a client certificate", tlsClient(nil), tlsURL, false},
		{"TLS with a self-made client certificate", tlsClient(selfSigned(t)), tlsURL, false},
		{"TLS with the apiserver's etcd client certificate", tlsClient(&apiserverCert), tlsURL, true},
	}
	for _, a := range attempts {
		secrets, answer := readSecrets(a.client, a.url)
		t.Logf("etcd range /registry/secrets/ over %-48s -> %s", a.what, answer)
		switch {
		case a.reads && !strings.Contains(secrets, marker):
			t.Errorf("%s: did not read the Secret (%s); the apiserver's certificate must", a.what, answer)
		case !a.reads && strings.Contains(secrets, marker):
			t.Errorf("%s: read the Secret from etcd, want refused", a.what)
		}
	}
}

// readSecrets asks etcd's JSON gateway for every key under /registry/secrets/ and returns
// the values read (raw, joined) and a one-line account of the answer.
func readSecrets(c *http.Client, base string) (string, string) {
	b64 := base64.StdEncoding.EncodeToString
	body, _ := json.Marshal(map[string]string{"key": b64([]byte("/registry/secrets/")), "range_end": b64([]byte("/registry/secrets0"))})
	resp, err := c.Post(base+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", "refused: " + err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct {
		Kvs []struct {
			Key, Value string
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &r) != nil {
		return "", fmt.Sprintf("refused: HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var values strings.Builder
	for _, kv := range r.Kvs {
		v, _ := base64.StdEncoding.DecodeString(kv.Value)
		values.Write(v)
	}
	return values.String(), fmt.Sprintf("read %d keys", len(r.Kvs))
}

// selfSigned is a client certificate an attacker makes for itself.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
