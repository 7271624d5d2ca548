package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the node's key and certificate in Config.CertDir.
const (
	certFile = "node.crt"
	keyFile  = "node.key"
)

const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"

// nodeUser is the user a node's certificate names, which the Node authorizer and
// NodeRestriction know as that node.
func nodeUser(node string) string { return "system:node:" + node }

// ErrTokenRefused: the apiserver does not take the bootstrap token. Retrying does not help.
var ErrTokenRefused = errors.New("the apiserver refused the bootstrap token")

// keptCertificate is the node's certificate from dir when it is there, names the node and
// is valid for at least another hour; nil otherwise.
func keptCertificate(dir, node string, now time.Time) *tls.Certificate {
	if dir == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.Subject.CommonName != nodeUser(node) || now.Add(time.Hour).After(leaf.NotAfter) {
		return nil
	}
	cert.Leaf = leaf
	return &cert
}

// bootstrap is the kubelet's TLS bootstrap: a new key, a certificate request for the
// kubelet client signer with the node's user and group, sent with the bootstrap token, and
// the wait for kube-controller-manager to approve and sign it. The key and certificate are
// kept in cfg.CertDir.
func bootstrap(ctx context.Context, cfg *Config) (*tls.Certificate, error) {
	c, err := newClient(cfg.Server, cfg.CA, cfg.Token, nil)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: nodeUser(cfg.NodeName), Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, err
	}
	req := &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			// What kube-controller-manager's approver accepts for an ECDSA key.
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	var csr certificatesv1.CertificateSigningRequest
	err = retry(ctx, cfg.Log, "asking for the node's certificate", func() error {
		return c.do(ctx, http.MethodPost, csrPath, contentJSON, req, &csr)
	})
	if err != nil {
		return nil, bootstrapError(err)
	}
	fmt.Fprintf(cfg.Log, "anvil-node-agent: certificate request %s sent; waiting for it to be approved and signed\n", csr.Name)
	certPEM, err := awaitCertificate(ctx, c, cfg.Log, csr.Name)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the signed certificate of %s: %w", csr.Name, err)
	}
	if cfg.CertDir != "" {
		if err := keep(cfg.CertDir, certPEM, keyPEM); err != nil {
			fmt.Fprintf(cfg.Log, "anvil-node-agent: keeping the certificate in %s: %v\n", cfg.CertDir, err)
		}
	}
	return &cert, nil
}

// bootstrapError explains the refusals a token can get.
func bootstrapError(err error) error {
	if untrusted(err) {
		return fmt.Errorf("the apiserver's serving certificate is not trusted: --ca-file must be its CA, and the certificate must name the host of --server: %w", err)
	}
	switch codeOf(err) {
	case http.StatusUnauthorized:
		return fmt.Errorf("%w (401 Unauthorized): it is wrong, expired or deleted; give a token of the cluster's kube-system Secret bootstrap-token-<id>: %v", ErrTokenRefused, err)
	case http.StatusForbidden:
		return fmt.Errorf("%w (403 Forbidden): its user may not ask for node certificates; the token needs auth-extra-groups system:bootstrappers:anvil (or kubeadm's group) bound to system:node-bootstrapper: %v", ErrTokenRefused, err)
	}
	return err
}

// awaitCertificate polls the request until it carries a certificate, or was denied or failed.
func awaitCertificate(ctx context.Context, c *client, log io.Writer, name string) ([]byte, error) {
	start := time.Now()
	hinted := false
	for {
		var csr certificatesv1.CertificateSigningRequest
		err := c.do(ctx, http.MethodGet, csrPath+"/"+name, "", nil, &csr)
		switch {
		case err == nil:
			for _, cond := range csr.Status.Conditions {
				if (cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed) && cond.Status == corev1.ConditionTrue {
					return nil, fmt.Errorf("certificate request %s %s (%s): %s", name, cond.Type, cond.Reason, cond.Message)
				}
			}
			if len(csr.Status.Certificate) > 0 {
				return csr.Status.Certificate, nil
			}
		case !transient(err):
			return nil, bootstrapError(err)
		default:
			fmt.Fprintf(log, "anvil-node-agent: reading certificate request %s: %v\n", name, err)
		}
		if !hinted && time.Since(start) > time.Minute {
			fmt.Fprintf(log, "anvil-node-agent: certificate request %s is not signed after a minute: does the cluster's kube-controller-manager approve nodeclient requests and sign for %s?\n",
				name, certificatesv1.KubeAPIServerClientKubeletSignerName)
			hinted = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// keep writes the node's certificate and key into dir (0600, through a rename).
func keep(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{keyFile: keyPEM, certFile: certPEM} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
