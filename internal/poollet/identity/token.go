package identity

import (
	"context"
	"errors"
	"fmt"
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
	TokenLifetime  = time.Hour
	RefreshAt      = 0.8
	requestTimeout = 30 * time.Second
)

// Mode is where a poollet's credentials come from.
type Mode string

const (
	// ModeInvalid is the zero value: no mode was chosen.
	ModeInvalid Mode = ""
	// ModeOwn uses the credentials given (kubeconfig or the Pod's ServiceAccount) as they are.
	ModeOwn Mode = "own"
	// ModeNode is a DaemonSet's: the Pod's ServiceAccount (anvil-node-poollet) makes its
	// node's pool identity (Ensure) and requests tokens of it.
	ModeNode Mode = "node"
	// ModePoolToken is a Pod's whose ServiceAccount (a bare-metal site's) may request tokens
	// of the pool's poollet ServiceAccount, shipped with the site, and nothing of it else.
	ModePoolToken Mode = "pool-token"
)

// ParseMode reads a --identity value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeOwn, ModeNode, ModePoolToken:
		return m, nil
	}
	return ModeInvalid, fmt.Errorf("%q is not an identity: use %s (the credentials given), %s (a DaemonSet's, pool named after its node) or %s (tokens of the pool's poollet requested with the Pod's credentials)", s, ModeOwn, ModeNode, ModePoolToken)
}

// Config returns the configuration a poollet of pool acts with in mode, from the Pod's
// (or kubeconfig's) base. In ModeNode and ModePoolToken base's credentials are dropped:
// each request carries a token of anvil-system/poollet-<pool> bound to node, renewed before
// it expires; ModeNode first makes that identity (Ensure). (The API server binds a token
// to a Pod only when the Pod runs as the token's ServiceAccount, so a Pod's own cannot be
// used: its node is the tightest binding left, with a short lifetime.)
func Config(ctx context.Context, base *rest.Config, mode Mode, pool, node string) (*rest.Config, error) {
	switch mode {
	case ModeOwn:
		return base, nil
	case ModeNode, ModePoolToken:
	default:
		return nil, fmt.Errorf("identity %q: %w", mode, errors.New("not a mode"))
	}
	if node == "" {
		return nil, errors.New("the node's name is needed to bind the poollet's tokens to (NODE_NAME, the downward API's spec.nodeName)")
	}
	if mode == ModeNode {
		c, err := client.New(base, client.Options{})
		if err != nil {
			return nil, err
		}
		if err := Ensure(ctx, c, pool); err != nil {
			return nil, err
		}
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
	// Every request waits on this one while a token is due: never wait for ever.
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	tr, err := s.client.CoreV1().ServiceAccounts(secretaccess.PoolletNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
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
