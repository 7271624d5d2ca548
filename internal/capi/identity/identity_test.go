package identity

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const secretValue = "s3cr3t-value"

// kubeconfig is a usable identity kubeconfig changed by edit.
func kubeconfig(t *testing.T, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, *clientcmdapi.Context)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	c := &clientcmdapi.Cluster{Server: "https://anvil.example:6443", CertificateAuthorityData: []byte("ca")}
	u := &clientcmdapi.AuthInfo{Token: secretValue}
	x := &clientcmdapi.Context{Cluster: "a", AuthInfo: "u", Namespace: "tenant-a"}
	if edit != nil {
		edit(c, u, x)
	}
	cfg.Clusters["a"], cfg.AuthInfos["u"], cfg.Contexts["x"] = c, u, x
	cfg.CurrentContext = "x"
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

type edit = func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, *clientcmdapi.Context)

func TestParseRefusesEverythingOutsideTheAllowList(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        edit
	}{
		{"tokenFile", "tokenFile", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}},
		{"exec", "exec", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}
		}},
		{"auth-provider", "auth-provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}},
		{"CA file", "certificate-authority", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			c.CertificateAuthority = "/etc/kubernetes/pki/ca.crt"
		}},
		{"client certificate file", "client-certificate", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ClientCertificate = "/etc/anvil/tls.crt"
		}},
		{"client key file", "client-key", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ClientKey = "/etc/anvil/tls.key"
		}},
		{"proxy", "proxy-url", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			c.ProxyURL = "http://attacker.example:3128"
		}},
		{"insecure", "insecure-skip-tls-verify", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			c.InsecureSkipTLSVerify = true
		}},
		{"impersonate", "as", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.Impersonate = "system:serviceaccount:anvil-system:anvil-manager"
		}},
		{"impersonate groups", "as-groups", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ImpersonateGroups = []string{"system:masters"}
		}},
		{"impersonate uid", "as-uid", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ImpersonateUID = "1"
		}},
		{"impersonate extra", "as-user-extra", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ImpersonateUserExtra = map[string][]string{"scopes": {"x"}}
		}},
		{"username", "username", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) { u.Username = "admin" }},
		{"password", "password", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.Password = secretValue
		}},
		{"plain http", "server", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			c.Server = "http://anvil.example:6443"
		}},
		{"user info in the URL", "server", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			c.Server = "https://admin:" + secretValue + "@anvil.example"
		}},
		{"no credentials", "user", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) { u.Token = "" }},
		{"certificate without key", "client-certificate-data", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
			u.ClientCertificateData = []byte(secretValue)
		}},
		{"no namespace", "", func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, x *clientcmdapi.Context) { x.Namespace = "" }},
		{"no such user", "", func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, x *clientcmdapi.Context) { x.AuthInfo = "other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(kubeconfig(t, tc.edit))
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("Parse: %v, want a refusal", err)
			}
			if r.Field != tc.field {
				t.Errorf("refusal names %q, want %q: %v", r.Field, tc.field, err)
			}
			if strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), "/etc/") || strings.Contains(err.Error(), "attacker") {
				t.Errorf("the refusal repeats a value of the kubeconfig: %v", err)
			}
		})
	}
	if _, err := Parse([]byte("token: " + secretValue + "\n\t{")); err == nil || strings.Contains(err.Error(), secretValue) {
		t.Errorf("not a kubeconfig: %v", err)
	}
}

func TestParseBuildsOnlyTheAllowedFields(t *testing.T) {
	id, err := Parse(kubeconfig(t, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Context) {
		c.TLSServerName = "anvil.internal"
		u.ClientCertificateData, u.ClientKeyData = []byte("cert"), []byte("key")
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := id.Config()
	if id.Namespace != "tenant-a" || id.Host() != "anvil.example:6443" || cfg.Host != "https://anvil.example:6443" ||
		cfg.BearerToken != secretValue || string(cfg.CAData) != "ca" || cfg.ServerName != "anvil.internal" ||
		string(cfg.CertData) != "cert" || string(cfg.KeyData) != "key" {
		t.Fatalf("Parse: %+v, config %+v", id, cfg)
	}
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CAFile != "" || cfg.Impersonate.UserName != "" || cfg.Insecure {
		t.Fatalf("config has more than the allow-list: %+v", cfg)
	}
	if u, err := cfg.Proxy(nil); u != nil || err != nil {
		t.Fatalf("config proxies: %v %v", u, err)
	}
}

func TestAddressProblem(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.3.2.1": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"0.0.0.0": "unspecified", "::": "unspecified",
		"169.254.169.254": "link-local", "169.254.0.1": "link-local", "fe80::1": "link-local",
		"fd00:ec2::254": "cloud metadata", "100.100.100.200": "cloud metadata",
		"10.0.0.5": "", "192.168.1.10": "", "203.0.113.7": "", "2001:db8::1": "",
	} {
		if got := AddressProblem(netip.MustParseAddr(addr), false); got != want {
			t.Errorf("AddressProblem(%s) = %q, want %q", addr, got, want)
		}
	}
	if got := AddressProblem(netip.MustParseAddr("127.0.0.1"), true); got != "" {
		t.Errorf("loopback allowed: %q", got)
	}
	if got := AddressProblem(netip.MustParseAddr("169.254.169.254"), true); got == "" {
		t.Error("allowing loopback allowed the metadata service")
	}
	// A name is refused when any of its addresses is.
	if err := CheckAddresses("rebind.example", []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("127.0.0.1")}, false); err == nil {
		t.Error("a name resolving to a public and a loopback address was accepted")
	}
	if err := CheckAddresses("none.example", nil, true); err == nil {
		t.Error("a name without addresses was accepted")
	}
}

func TestNamespaceAllowed(t *testing.T) {
	grants := []Grant{{RemoteNamespace: "tenant-a", AllowedNamespaces: []string{"pivot"}}}
	for _, tc := range []struct {
		local, remote string
		want          bool
	}{
		{"pivot", "pivot", true},
		{"pivot", "tenant-a", true},
		{"other", "tenant-a", false},
		{"pivot", "tenant-b", false},
		{"tenant-a", "pivot", false},
	} {
		if got := NamespaceAllowed(tc.local, tc.remote, grants); got != tc.want {
			t.Errorf("NamespaceAllowed(%s, %s) = %v, want %v", tc.local, tc.remote, got, tc.want)
		}
	}
}
