package consoleapi

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/harness"
)

// The manager's replicas start at once against a cluster with no certificate: they end up
// serving one and the same, of one CA, valid for the Service's name; a Secret that holds
// something else is an error naming it and is left as it was; the CA reaches the
// APIService once there is one.
func TestReplicasShareOneServingCertificate(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", harness.StartAPIServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServiceNamespace}}); err != nil {
		t.Fatal(err)
	}

	const replicas = 4
	got := make([]*Serving, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { got[i], errs[i] = SharedServing(ctx, c, c, ServingSecret) })
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(got[i].Cert.Certificate[0], got[0].Cert.Certificate[0]) || !bytes.Equal(got[i].CABundle, got[0].CABundle) {
			t.Errorf("replica %d serves another certificate or CA than replica 0", i)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(got[0].CABundle) {
		t.Fatal("the CA bundle holds no certificate")
	}
	leaf, err := x509.ParseCertificate(got[0].Cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "anvil-console.anvil-system.svc"}); err != nil {
		t.Errorf("the certificate does not verify as kube-apiserver checks it: %v", err)
	}

	broken := ServingSecret
	broken.Name = "not-a-certificate"
	junk := map[string][]byte{"tls.crt": []byte("junk"), "tls.key": []byte("junk")}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: broken.Name, Namespace: broken.Namespace}, Data: junk}); err != nil {
		t.Fatal(err)
	}
	if _, err := SharedServing(ctx, c, c, broken); err == nil || !strings.Contains(err.Error(), broken.String()) {
		t.Errorf("a Secret holding no certificate: %v, want an error naming it", err)
	}
	kept := &corev1.Secret{}
	if err := c.Get(ctx, broken, kept); err != nil || string(kept.Data["tls.crt"]) != "junk" {
		t.Errorf("the Secret holding no certificate was changed: %v %q", err, kept.Data["tls.crt"])
	}

	publisher := CABundlePublisher{Client: c, CABundle: got[0].CABundle}
	if err := publisher.publish(ctx); err == nil || !strings.Contains(err.Error(), "no APIService") {
		t.Errorf("publishing before the APIService exists: %v, want it said", err)
	}
	api := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": APIServiceName},
		"spec": map[string]any{"group": Group, "version": Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": ServiceNamespace, "name": ServiceName, "port": int64(443)}},
	}}
	if err := c.Create(ctx, api); err != nil {
		t.Fatal(err)
	}
	if err := publisher.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: APIServiceName}, api); err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	if want := base64.StdEncoding.EncodeToString(got[0].CABundle); bundle != want {
		t.Errorf("the APIService's caBundle is %q, want the shared CA's %q", bundle, want)
	}
}
