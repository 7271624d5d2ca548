package clusterapi

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// A webhook configuration as controller-gen writes it calls the provider's Service; installed,
// it carries clusterctl's prefix and calls the manager on loopback with the CA it trusts.
func TestWebhookConfigurationCallsTheManagerOnLoopback(t *testing.T) {
	s := webhookServer{port: 9443, caPEM: []byte("ca")}
	u := decode(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: validation.cluster.cluster.x-k8s.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-cluster-x-k8s-io-v1beta2-cluster}
`)
	obj, err := webhookConfiguration(u, Core, s)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := obj.(*admissionv1.ValidatingWebhookConfiguration)
	if !ok {
		t.Fatalf("got %T, want a ValidatingWebhookConfiguration", obj)
	}
	if w.Name != "capi-validating-webhook-configuration" {
		t.Errorf("name %s, want capi-validating-webhook-configuration", w.Name)
	}
	cc := w.Webhooks[0].ClientConfig
	if cc.Service != nil || cc.URL == nil || *cc.URL != "https://127.0.0.1:9443/validate-cluster-x-k8s-io-v1beta2-cluster" || string(cc.CABundle) != "ca" {
		t.Errorf("clientConfig service %v, url %v, caBundle %q; want only https://127.0.0.1:9443/validate-cluster-x-k8s-io-v1beta2-cluster and the CA", cc.Service, cc.URL, cc.CABundle)
	}
}

func TestWebhookConfigurationRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"a webhook without a service path": `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: default.cluster.cluster.x-k8s.io
  clientConfig: {url: "https://example.com/mutate"}
`,
		"another kind": `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
`,
	} {
		if _, err := webhookConfiguration(decode(t, doc), Core, webhookServer{port: 1}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Every CRD of a provider converts through that provider's /convert, where clusterctl init's
// call its Service.
func TestConvertThroughTheProvidersWebhook(t *testing.T) {
	def := &apiextv1.CustomResourceDefinition{}
	convertThrough(def, webhookServer{port: 9443, caPEM: []byte("ca")})
	c := def.Spec.Conversion
	if c == nil || c.Strategy != apiextv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil ||
		c.Webhook.ClientConfig.URL == nil || *c.Webhook.ClientConfig.URL != "https://127.0.0.1:9443/convert" ||
		string(c.Webhook.ClientConfig.CABundle) != "ca" || strings.Join(c.Webhook.ConversionReviewVersions, ",") != "v1,v1beta1" {
		t.Errorf("conversion %+v, want the webhook at https://127.0.0.1:9443/convert with the CA", c)
	}
}
