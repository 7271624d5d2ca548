package consoleapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/anvil-dev/anvil/internal/pki"
)

// Serving is the console server's certificate and the CA that signed it, which the
// APIService names (caBundle) so that kube-apiserver trusts the server.
type Serving struct {
	Cert tls.Certificate
	// CABundle is the PEM of the CA's certificate.
	CABundle []byte
}

// servingValidity is how long a console server's CA and certificate are valid. Nothing
// renews them yet (docs/console.md): a shared one is made anew by deleting its Secret and
// restarting the managers.
const servingValidity = 10 * 365 * 24 * time.Hour

// serviceHost is the name kube-apiserver dials the server by: its Service's.
const serviceHost = ServiceName + "." + ServiceNamespace + ".svc"

// NewServing makes a CA and a certificate for hosts and the Service's name: one server's
// own, as anvil dev's (made anew at every start, like its control plane's).
func NewServing(hosts ...string) (*Serving, error) {
	ca, err := pki.NewCA("anvil-console-server-ca", servingValidity)
	if err != nil {
		return nil, err
	}
	cert, err := ca.IssueServing(append(hosts, serviceHost)...)
	if err != nil {
		return nil, err
	}
	return &Serving{Cert: cert, CABundle: ca.PEM}, nil
}

// ServingSecret is the Secret the manager's replicas share their serving certificate
// through: each serves behind one Service, so all must present a certificate of the CA
// the APIService names.
var ServingSecret = types.NamespacedName{Namespace: ServiceNamespace, Name: "anvil-console-serving"}

// The Secret's keys: kubernetes.io/tls's, and the CA's certificate as cert-manager names it.
const (
	secretCA   = "ca.crt"
	secretCert = corev1.TLSCertKey
	secretKey  = corev1.TLSPrivateKeyKey
)

// SharedServing reads the serving certificate in Secret key, making it first when there is
// none: the replica whose create succeeds made it, the others read what it made. A Secret
// that holds no usable certificate is an error naming it, not replaced: another replica may
// be serving with it.
func SharedServing(ctx context.Context, c client.Client, reader client.Reader, key types.NamespacedName) (*Serving, error) {
	s := &corev1.Secret{}
	err := reader.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		var made *Serving
		if made, err = NewServing(); err != nil {
			return nil, err
		}
		if s, err = servingSecret(key, made); err != nil {
			return nil, err
		}
		if err = c.Create(ctx, s); err == nil {
			log.FromContext(ctx).Info("made the console server's certificate", "secret", key.String())
			return made, nil
		}
		if apierrors.IsAlreadyExists(err) {
			err = reader.Get(ctx, key, s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the console server's certificate (Secret %s): %w", key, err)
	}
	cert, err := tls.X509KeyPair(s.Data[secretCert], s.Data[secretKey])
	if err != nil || len(s.Data[secretCA]) == 0 {
		return nil, fmt.Errorf("Secret %s holds no console server certificate (%s, %s and %s): delete it and restart the managers to make one: %v",
			key, secretCA, secretCert, secretKey, err)
	}
	return &Serving{Cert: cert, CABundle: s.Data[secretCA]}, nil
}

// servingSecret is the Secret that holds s.
func servingSecret(key types.NamespacedName, s *Serving) (*corev1.Secret, error) {
	der, err := x509.MarshalPKCS8PrivateKey(s.Cert.PrivateKey)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "anvil", "app.kubernetes.io/component": "console-server"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			secretCA:   s.CABundle,
			secretCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Cert.Certificate[0]}),
			secretKey:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		},
	}, nil
}

// APIServiceName is the name of the APIService of the group.
const APIServiceName = Version + "." + Group

// CABundlePublisher writes the CA of the server's certificate into the APIService that
// config/ ships without one, so that kube-apiserver trusts the server; it retries until it
// can (the APIService may be applied after the manager starts). Every replica writes the
// same CA, so it runs on all of them, not only the leader.
type CABundlePublisher struct {
	Client   client.Client
	CABundle []byte
}

// NeedLeaderElection: every replica serves consoles.
func (CABundlePublisher) NeedLeaderElection() bool { return false }

// Start writes the CA and returns once it has (or ctx ends).
func (p CABundlePublisher) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("apiservice", APIServiceName)
	for wait := time.Second; ; wait = min(2*wait, time.Minute) {
		err := p.publish(ctx)
		if err == nil {
			logger.Info("the APIService trusts the console server's CA")
			return nil
		}
		logger.Info("cannot write the console server's CA into its APIService yet", "error", err.Error(), "retry", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (p CABundlePublisher) publish(ctx context.Context) error {
	api := &unstructured.Unstructured{}
	api.SetAPIVersion("apiregistration.k8s.io/v1")
	api.SetKind("APIService")
	api.SetName(APIServiceName)
	bundle := base64.StdEncoding.EncodeToString(p.CABundle)
	patch := fmt.Appendf(nil, `{"spec":{"caBundle":%q}}`, bundle)
	err := p.Client.Patch(ctx, api, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return errors.New("no APIService " + APIServiceName + ": apply config/default (docs/cluster-install.md)")
	}
	return err
}
