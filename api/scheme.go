package api

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	infrastructurev1alpha1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// AddToScheme registers the built-in Kubernetes kinds, CustomResourceDefinitions and every
// anvil API group (the Cluster API provider's too: registering a kind installs nothing).
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextv1.AddToScheme,
		computev1alpha1.AddToScheme,
		imagesv1alpha1.AddToScheme,
		metalv1alpha1.AddToScheme,
		infrastructurev1alpha1.AddToScheme,
		// Cluster API's core kinds, which the provider reads (Clusters, Machines).
		clusterv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a scheme holding everything AddToScheme registers.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	return s, AddToScheme(s)
}
