package identity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
)

// TokenLifetime is how long each requested token is valid; the admission policy refuses
// longer ones. A token is replaced once RefreshAt of its lifetime has passed.
const (
	TokenLifetime = time.Hour
	RefreshAt     = 0.8
)

// NodeFromEnv reads the name of the node the Pod runs on from NODE_NAME, which the
// DaemonSet sets from the downward API's spec.nodeName (config/poollet).
func NodeFromEnv() (string, error) {
	n := os.Getenv("NODE_NAME")
	if n == "" {
		return "", errors.New("NODE_NAME must be set (the downward API's spec.nodeName)")
	}
	return n, nil
}

// Config makes pool's poollet identity (Ensure) with the Pod's own credentials in base, and
// returns a configuration that acts as that identity alone: base's credentials are dropped
// and each request carries a token of anvil-system/poollet-<pool> bound to node, renewed
// before it expires. (The API server binds a token to a Pod only when the Pod runs as the
// token's ServiceAccount, so a DaemonSet Pod's own cannot be used: the node is the tightest
// binding left, with a short lifetime.)
func Config(ctx context.Context, base *rest.Config, pool, node string) (*rest.Config, error) {
	c, err := client.New(base, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := Ensure(ctx, c, pool); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	src := transport.NewCachedTokenSource(&tokenSource{client: cs, pool: pool, node: node, now: time.Now})
	// The first token now, so a refused request fails the start and not the first call.
	if _, err := src.Token(); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.WrapTransport = transport.ResettableTokenSourceWrapTransport(src)
	return cfg, nil
}

// tokenSource requests a new token of pool's poollet ServiceAccount, bound to node.
type tokenSource struct {
	client kubernetes.Interface
	pool   string
	node   string
	now    func() time.Time
}

func (s *tokenSource) Token() (*oauth2.Token, error) {
	seconds := int64(TokenLifetime / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: s.node},
	}}
	sa := secretaccess.ServiceAccountName(s.pool)
	issued := s.now()
	tr, err := s.client.CoreV1().ServiceAccounts(secretaccess.PoolletNamespace).CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of ServiceAccount %s/%s bound to Node %s: %w", secretaccess.PoolletNamespace, sa, s.node, err)
	}
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: renewal(issued, tr.Status.ExpirationTimestamp.Time)}, nil
}

// renewal is when a token issued at issued and expiring at expires is replaced: after
// RefreshAt of its lifetime, so a slow apiserver still leaves time to get the next one.
func renewal(issued, expires time.Time) time.Time {
	return issued.Add(time.Duration(float64(expires.Sub(issued)) * RefreshAt))
}
