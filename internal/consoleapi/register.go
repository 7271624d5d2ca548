package consoleapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/manifest"
)

// RegisterLocal tells a kube-apiserver on the same host (anvil dev's) to pass the group's
// requests to the server: a Service of type ExternalName for localhost, the server's port
// and the APIService with its CA. In a fleet the Service selects the manager's Pods
// instead; the APIService is the same.
func RegisterLocal(ctx context.Context, c client.Client, s *Server) error {
	_, portText, err := net.SplitHostPort(s.Address())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServiceNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: ServiceNamespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}}}
	if err := manifest.Apply(ctx, c, svc); err != nil {
		return fmt.Errorf("the console server's Service: %w", err)
	}
	api := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": APIServiceName},
		"spec": map[string]any{
			"group": Group, "version": Version, "caBundle": base64.StdEncoding.EncodeToString(s.CABundle),
			"service":              map[string]any{"namespace": ServiceNamespace, "name": ServiceName, "port": int64(port)},
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	return manifest.Apply(ctx, c, api)
}
