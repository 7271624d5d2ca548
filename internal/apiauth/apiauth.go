// Package apiauth is how anvil's own servers (the console server, a poollet's console
// endpoint) learn from the cluster who calls them and what the caller may do: a bearer
// token reviewed by the API server (TokenReview), optionally the user kube-apiserver's
// front proxy names in its headers, and a SubjectAccessReview per request; answers are
// cached briefly (k8s.io/apiserver's delegating authenticator and authorizer, as
// aggregated API servers use them).
package apiauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
// proxy's CA and header names.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// Delegated authenticates requests as the cluster vouches for them and authorizes them
// with a SubjectAccessReview.
type Delegated struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// Refusal is a request the cluster does not vouch for (Unauthenticated) or whose user may
// not do what it asks; Message never repeats a credential.
type Refusal struct {
	Unauthenticated bool
	Message         string
}

func (r *Refusal) Error() string { return r.Message }

// New reviews bearer tokens and, with frontProxy, also trusts kube-apiserver's front proxy
// as its settings say now (read once: a new front-proxy CA needs the server restarted, as
// anvil dev restarts both together).
func New(ctx context.Context, cs kubernetes.Interface, frontProxy bool) (*Delegated, error) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	cfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient: cs.AuthenticationV1(), TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff: &backoff, CacheTTL: 10 * time.Second,
	}
	if frontProxy {
		h, err := frontProxyConfig(ctx, cs)
		if err != nil {
			return nil, err
		}
		cfg.RequestHeaderConfig = h
	}
	authn, _, err := cfg.New()
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
	return &Delegated{authn: authn, authz: authz}, nil
}

// Check authenticates r and asks whether its user may do attrs (whose User it fills in):
// nil, a *Refusal, or an error saying the cluster could not be asked.
func (d *Delegated) Check(r *http.Request, attrs authorizer.AttributesRecord) error {
	resp, ok, err := d.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		return &Refusal{Unauthenticated: true, Message: "the request is not authenticated"}
	}
	attrs.User = resp.User
	decision, reason, err := d.authz.Authorize(r.Context(), attrs)
	if err != nil && decision != authorizer.DecisionAllow {
		return fmt.Errorf("the caller's access could not be reviewed: %w", err)
	}
	if decision != authorizer.DecisionAllow {
		msg := fmt.Sprintf("%s may not %s %s", resp.User.GetName(), attrs.Verb, resourceOf(attrs))
		if reason != "" {
			msg += ": " + reason
		}
		return &Refusal{Message: msg}
	}
	return nil
}

// resourceOf names what attrs ask for, as kubectl would: "machines/console of Machine
// ns/name", "machinepools/proxy of pool p".
func resourceOf(a authorizer.AttributesRecord) string {
	s := a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	switch {
	case a.Namespace != "":
		return fmt.Sprintf("%s of %s/%s", s, a.Namespace, a.Name)
	case a.Name != "":
		return fmt.Sprintf("%s of %s", s, a.Name)
	}
	return s
}

// frontProxyConfig is kube-apiserver's front proxy, from the ConfigMap it publishes.
func frontProxyConfig(ctx context.Context, cs kubernetes.Interface) (*authenticatorfactory.RequestHeaderConfig, error) {
	cm, err := cs.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
	}
	ca := cm.Data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, errors.New("kube-apiserver has no front proxy (--requestheader-client-ca-file and --proxy-client-cert-file): it cannot pass requests on to an aggregated server")
	}
	caContent, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", []byte(ca))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver's front-proxy CA: %w", err)
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
		var v []string
		if raw := cm.Data[f.key]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return nil, fmt.Errorf("%s in %s/%s: %w", f.key, authConfigMapNamespace, authConfigMapName, err)
			}
		}
		*f.to = headerrequest.StaticStringSlice(v)
	}
	return h, nil
}
