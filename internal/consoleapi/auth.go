package consoleapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// authConfigMap is where kube-apiserver publishes how it vouches for users: its front
// proxy's CA and header names, and its client CA.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// delegated authenticates a request as kube-apiserver would and authorizes it with a
// SubjectAccessReview.
type delegated struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// newDelegated reads kube-apiserver's front-proxy settings once (a new front-proxy CA
// needs this server restarted, as anvil dev restarts both together).
func newDelegated(ctx context.Context, cs kubernetes.Interface) (*delegated, error) {
	cm, err := cs.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
	}
	ca := cm.Data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, errors.New("kube-apiserver has no front proxy (--requestheader-client-ca-file and --proxy-client-cert-file): it cannot pass requests on to the console server")
	}
	caContent, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", []byte(ca))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver's front-proxy CA: %w", err)
	}
	list := func(key string) (headerrequest.StaticStringSlice, error) {
		var v []string
		if raw := cm.Data[key]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return nil, fmt.Errorf("%s in %s/%s: %w", key, authConfigMapNamespace, authConfigMapName, err)
			}
		}
		return v, nil
	}
	h := &authenticatorfactory.RequestHeaderConfig{CAContentProvider: caContent}
	for _, f := range []struct {
		key string
		to  *headerrequest.StringSliceProvider
	}{
		{"requestheader-username-headers", &h.UsernameHeaders}, {"requestheader-uid-headers", &h.UIDHeaders},
		{"requestheader-group-headers", &h.GroupHeaders}, {"requestheader-extra-headers-prefix", &h.ExtraHeaderPrefixes},
		{"requestheader-allowed-names", &h.AllowedClientNames},
	} {
		v, err := list(f.key)
		if err != nil {
			return nil, err
		}
		*f.to = v
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient: cs.AuthenticationV1(), TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff: &backoff, CacheTTL: 10 * time.Second, RequestHeaderConfig: h,
	}.New()
	if err != nil {
		return nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(), AllowCacheTTL: 10 * time.Second, DenyCacheTTL: time.Second,
		WebhookRetryBackoff: &backoff,
	}.New()
	if err != nil {
		return nil, err
	}
	return &delegated{authn: authn, authz: authz}, nil
}
