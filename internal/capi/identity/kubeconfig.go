package identity

import (
	"fmt"
	"net/http"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identity is what the provider uses of an identity kubeconfig: the current context's
// server, CA, TLS server name, credentials and namespace, nothing else.
type Identity struct {
	// Server is the control plane's URL (https).
	Server *url.URL
	// Namespace is where the cluster's anvil Machines go (the current context's).
	Namespace string

	caData, certData, keyData []byte
	tlsServerName, token      string
}

// Host is the server's host and port, what conditions name (never a credential).
func (id Identity) Host() string { return id.Server.Host }

// Config is the client configuration of the identity, built field by field: nothing the
// kubeconfig could add (exec plugins, files, proxies, impersonation) is in it. The caller
// adds its dialer and timeouts.
func (id Identity) Config() *rest.Config {
	return &rest.Config{
		Host:        id.Server.String(),
		BearerToken: id.token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:     id.caData,
			CertData:   id.certData,
			KeyData:    id.keyData,
			ServerName: id.tlsServerName,
		},
		// An empty function rather than nil: client-go would read HTTPS_PROXY for nil.
		Proxy: noProxy,
	}
}

// Refusal says which field of the kubeconfig makes it unusable. Its message names the field,
// never its value.
type Refusal struct {
	// Field is the kubeconfig field, as kubeconfigs spell it (tokenFile, exec, proxy-url).
	Field string
	// Why is the rest of the message.
	Why string
}

func (r *Refusal) Error() string {
	if r.Field == "" {
		return r.Why
	}
	return fmt.Sprintf("the kubeconfig sets %s: %s", r.Field, r.Why)
}

// Allowed lists the kubeconfig fields the provider uses.
const Allowed = "server, certificate-authority-data, tls-server-name, token, client-certificate-data, client-key-data and the context's namespace"

const notAllowed = "an identity kubeconfig may use only " + Allowed

// Parse reads an identity kubeconfig and refuses every field it would not use. The error is
// a *Refusal.
func Parse(kubeconfig []byte) (Identity, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// The parser's message may quote the content (a token): not repeated.
		return Identity{}, &Refusal{Why: "the identity is not a kubeconfig (YAML or JSON)"}
	}
	ctx := raw.Contexts[raw.CurrentContext]
	if raw.CurrentContext == "" || ctx == nil {
		return Identity{}, &Refusal{Why: "the kubeconfig's current-context names no context in it"}
	}
	cluster, user := raw.Clusters[ctx.Cluster], raw.AuthInfos[ctx.AuthInfo]
	switch {
	case cluster == nil:
		return Identity{}, &Refusal{Why: "the kubeconfig's current context names no cluster in it"}
	case user == nil:
		return Identity{}, &Refusal{Why: "the kubeconfig's current context names no user in it"}
	case ctx.Namespace == "":
		// Read from the context itself: clientcmd's Namespace() says "default" for none.
		return Identity{}, &Refusal{Why: "the kubeconfig's current context names no namespace: set it to the namespace the cluster's anvil Machines go to"}
	}
	if f := refusedCluster(cluster); f != "" {
		return Identity{}, &Refusal{Field: f, Why: notAllowed}
	}
	if f := refusedUser(user); f != "" {
		return Identity{}, &Refusal{Field: f, Why: notAllowed}
	}
	server, err := url.Parse(cluster.Server)
	if err != nil || server.Scheme != "https" || server.Host == "" || server.User != nil || server.Hostname() == "" {
		return Identity{}, &Refusal{Field: "server", Why: "it must be an https:// URL with a host (and no user info)"}
	}
	if (len(user.ClientCertificateData) == 0) != (len(user.ClientKeyData) == 0) {
		return Identity{}, &Refusal{Field: "client-certificate-data", Why: "client-certificate-data and client-key-data go together"}
	}
	if user.Token == "" && len(user.ClientCertificateData) == 0 {
		return Identity{}, &Refusal{Field: "user", Why: "the current context's user has no token and no client-certificate-data: the provider would call anonymously"}
	}
	return Identity{Server: server, Namespace: ctx.Namespace, caData: cluster.CertificateAuthorityData,
		tlsServerName: cluster.TLSServerName, token: user.Token,
		certData: user.ClientCertificateData, keyData: user.ClientKeyData}, nil
}

// refusedCluster names the first field of the cluster entry outside the allow-list.
func refusedCluster(c *clientcmdapi.Cluster) string {
	switch {
	case c.CertificateAuthority != "":
		return "certificate-authority" // a file of the manager's
	case c.InsecureSkipTLSVerify:
		return "insecure-skip-tls-verify"
	case c.ProxyURL != "":
		return "proxy-url"
	}
	return ""
}

// refusedUser names the first field of the user entry outside the allow-list.
func refusedUser(u *clientcmdapi.AuthInfo) string {
	switch {
	case u.TokenFile != "":
		return "tokenFile" // the manager's own ServiceAccount token, say
	case u.ClientCertificate != "":
		return "client-certificate"
	case u.ClientKey != "":
		return "client-key"
	case u.Exec != nil:
		return "exec" // a command the manager would run
	case u.AuthProvider != nil:
		return "auth-provider"
	case u.Impersonate != "":
		return "as"
	case u.ImpersonateUID != "":
		return "as-uid"
	case len(u.ImpersonateGroups) > 0:
		return "as-groups"
	case len(u.ImpersonateUserExtra) > 0:
		return "as-user-extra"
	case u.Username != "":
		return "username"
	case u.Password != "":
		return "password"
	}
	return ""
}

// noProxy sends every request directly.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }
