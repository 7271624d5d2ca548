package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/manifest"
)

// webhookServer is where one provider's webhook server listens and what the apiserver
// trusts when it calls it.
type webhookServer struct {
	port int
	// certDir holds the serving certificate and key under the names the managers'
	// --webhook-cert-dir is read for (their --webhook-cert-name and --webhook-key-name
	// defaults), and the CA that signed them.
	certDir string
	caPEM   []byte // the caBundle of every webhook and conversion that calls this server
}

// Where the managers read their serving certificate and key in --webhook-cert-dir.
const (
	servingCertFile = "tls.crt"
	servingKeyFile  = "tls.key"
)

// newWebhookServer picks a free port for p's webhook server (managerPort: it listens on
// every interface, and the apiserver calls it on 127.0.0.1) and writes a CA and a serving
// certificate for 127.0.0.1 it signed into a new temporary folder.
func newWebhookServer(p Provider) (webhookServer, error) {
	port, err := managerPort()
	if err != nil {
		return webhookServer{}, err
	}
	dir, err := os.MkdirTemp("", "anvil-capi-"+p.Name+"-certs-")
	if err != nil {
		return webhookServer{}, err
	}
	ca, err := controlplane.WriteServingCert(dir, servingCertFile, servingKeyFile, []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		_ = os.RemoveAll(dir)
		return webhookServer{}, fmt.Errorf("making the webhook serving certificate of %s: %w", p.Name, err)
	}
	return webhookServer{port: port, certDir: dir, caPEM: ca}, nil
}

// url is where the apiserver calls path on the server.
func (s webhookServer) url(path string) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) + "/" + strings.TrimPrefix(path, "/")
}

// point makes the webhook's clientConfig call the server at the path of the in-cluster
// Service it names.
func (s webhookServer) point(webhook string, cc *admissionv1.WebhookClientConfig) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("webhook %s names no service path", webhook)
	}
	url := s.url(*cc.Service.Path)
	cc.URL, cc.Service, cc.CABundle = &url, nil, s.caPEM
	return nil
}

// installWebhooks creates or replaces p's webhook configurations, read from its manifests.
func installWebhooks(ctx context.Context, c client.Client, p Provider, f files, s webhookServer) error {
	objs, err := manifest.ReadDir(f.webhooks)
	if err != nil {
		return fmt.Errorf("reading the webhook configurations of %s from %s: %w", p.Name, f.webhooks, err)
	}
	for _, u := range objs {
		obj, err := webhookConfiguration(u, p, s)
		if err != nil {
			return fmt.Errorf("%s: %w", f.webhooks, err)
		}
		if err := manifest.Apply(ctx, c, obj); err != nil {
			return fmt.Errorf("installing %s %s: %w", u.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// webhookConfiguration is the Mutating- or ValidatingWebhookConfiguration u as clusterctl
// init installs it for p (named with p's prefix), each webhook calling s.
func webhookConfiguration(u *unstructured.Unstructured, p Provider, s webhookServer) (client.Object, error) {
	var obj client.Object
	switch u.GroupVersionKind() {
	case admissionv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"):
		obj = &admissionv1.MutatingWebhookConfiguration{}
	case admissionv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"):
		obj = &admissionv1.ValidatingWebhookConfiguration{}
	default:
		return nil, fmt.Errorf("%s %s is not an admissionregistration.k8s.io/v1 webhook configuration", u.GetKind(), u.GetName())
	}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
	switch w := obj.(type) {
	case *admissionv1.MutatingWebhookConfiguration:
		for i := range w.Webhooks {
			err = errors.Join(err, s.point(w.Webhooks[i].Name, &w.Webhooks[i].ClientConfig))
		}
	case *admissionv1.ValidatingWebhookConfiguration:
		for i := range w.Webhooks {
			err = errors.Join(err, s.point(w.Webhooks[i].Name, &w.Webhooks[i].ClientConfig))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	obj.SetName(p.WebhookPrefix + obj.GetName())
	return obj, nil
}
