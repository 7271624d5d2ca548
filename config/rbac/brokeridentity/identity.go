package brokeridentity

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/config/rbac"
)

// Identity installs the identity of the broker of upstream pool in namespace of the
// downstream cluster admin reaches (rbac.InstallBroker), asks for a token of it valid for
// expiration (0: the API server's default, an hour), and returns a config that acts with
// that token alone: admin's address and CA, none of its credentials. Write it with
// controlplane.WriteKubeconfig for a broker's --kubeconfig.
func Identity(ctx context.Context, admin *rest.Config, namespace, pool string, expiration time.Duration) (*rest.Config, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := rbac.InstallBroker(ctx, c, namespace, pool); err != nil {
		return nil, err
	}
	sa, err := rbac.BrokerServiceAccount(pool)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	req := &authenticationv1.TokenRequest{}
	if expiration > 0 {
		seconds := int64(expiration / time.Second)
		req.Spec.ExpirationSeconds = &seconds
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	// A kubeconfig written from cfg carries the CA's bytes, not a path to it.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, err
	}
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}
