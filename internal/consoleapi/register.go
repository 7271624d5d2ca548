package consoleapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: ServiceNamespace}}
	if err := apply(ctx, c, svc, func() {
		svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}}
	}); err != nil {
		return fmt.Errorf("the console server's Service: %w", err)
	}
	api := &unstructured.Unstructured{}
	api.SetAPIVersion("apiregistration.k8s.io/v1")
	api.SetKind("APIService")
	api.SetName(Version + "." + Group)
	return apply(ctx, c, api, func() {
		api.Object["spec"] = map[string]any{
			"group": Group, "version": Version, "caBundle": base64.StdEncoding.EncodeToString(s.CABundle),
			"service":              map[string]any{"namespace": ServiceNamespace, "name": ServiceName, "port": int64(port)},
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		}
	})
}

// apply creates obj with set's fields, or sets them on the existing one.
func apply(ctx context.Context, c client.Client, obj client.Object, set func()) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		set()
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	set()
	return c.Update(ctx, obj)
}
