package capi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// recorder is a listener that records what reaches it (its Authorization headers above all).
type recorder struct {
	mu       sync.Mutex
	requests []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Method+" "+req.Host+req.URL.Path+" Authorization="+req.Header.Get("Authorization"))
	r.mu.Unlock()
	w.WriteHeader(http.StatusUnauthorized)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// writeKubeconfig is a kubeconfig for server whose current context names namespace ns,
// changed by edit.
func writeKubeconfig(t *testing.T, server, ns string, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	c := &clientcmdapi.Cluster{Server: server}
	u := &clientcmdapi.AuthInfo{}
	if edit != nil {
		edit(c, u)
	}
	cfg.Clusters["anvil"], cfg.AuthInfos["tenant"] = c, u
	cfg.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "anvil", AuthInfo: "tenant", Namespace: ns}
	cfg.CurrentContext = "tenant"
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A tenant who may create a Secret and an AnvilCluster writes the identity kubeconfig. With
// clientcmd loading it as is, the provider sent the manager's ServiceAccount token (tokenFile)
// and client certificate (files) to the tenant's server, ran the tenant's command (exec),
// and went through the tenant's proxy. Each is refused by name now, and the listener standing
// for the tenant's server (and proxy) receives nothing. Loopback is allowed here, so only the
// kubeconfig check holds these.
func TestIdentityKubeconfigsSendNothingAndRunNothing(t *testing.T) {
	env := startProvider(t)
	ctx := context.Background()
	rec := &recorder{}
	srv := httptest.NewTLSServer(rec)
	defer srv.Close()
	proxy := httptest.NewServer(rec)
	defer proxy.Close()
	dir := t.TempDir()
	token := filepath.Join(dir, "token") // stands for /var/run/secrets/kubernetes.io/serviceaccount/token
	if err := os.WriteFile(token, []byte("the-managers-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "exec-ran")
	ns := namespace(t, env.Client, "attacker")

	attacks := []struct {
		name, field string
		edit        func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)
	}{
		{"token-file", "tokenFile", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.InsecureSkipTLSVerify = false
			c.CertificateAuthorityData = certPEM(srv)
			u.TokenFile = token
		}},
		{"exec", "exec", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData = certPEM(srv)
			u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
				Args:            []string{"-c", "touch " + marker + "; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'"},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}},
		{"cert-files", "client-certificate", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData = certPEM(srv)
			u.Token = "tenant"
			u.ClientCertificate, u.ClientKey = token, token // the manager's files, read on its host
		}},
		{"ca-file", "certificate-authority", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthority = token
			u.Token = "tenant"
		}},
		{"proxy", "proxy-url", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.ProxyURL = proxy.URL
			c.CertificateAuthorityData = certPEM(srv)
			u.TokenFile = token
		}},
		{"impersonation", "as", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData = certPEM(srv)
			u.Token, u.Impersonate = "tenant", "system:admin"
		}},
	}
	for _, a := range attacks {
		newCluster(t, env.Client, ns, a.name, writeKubeconfig(t, srv.URL, ns, a.edit))
		newMachine(t, env.Client, ns, a.name, a.name, "boot-"+a.name)
		if err := env.Client.Create(ctx, bootstrapData(ns, a.name, "boot-"+a.name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range attacks {
		msg := awaitReady(t, env.Client, &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.name}}, infrav1.ReasonIdentityUnusable, 30*time.Second)
		if !strings.Contains(msg, "sets "+a.field+":") {
			t.Errorf("%s: AnvilCluster says %q, want it to name %s", a.name, msg, a.field)
		}
		if strings.Contains(msg, dir) || strings.Contains(msg, "the-managers-token") {
			t.Errorf("%s: the condition repeats a value of the kubeconfig: %q", a.name, msg)
		}
		awaitReady(t, env.Client, &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.name}}, infrav1.ReasonIdentityUnusable, 30*time.Second)
		t.Logf("refused: %s (%s)", a.name, a.field)
	}
	time.Sleep(2 * time.Second) // any connection under way would arrive by now
	if got := rec.seen(); len(got) != 0 {
		t.Errorf("the tenant's server and proxy received %d requests: %v", len(got), got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the exec plugin ran on the manager's host")
	}
	machines := &computev1alpha1.MachineList{}
	if err := env.Client.List(ctx, machines); err != nil || len(machines.Items) != 0 {
		t.Errorf("anvil Machines made: %d (%v)", len(machines.Items), err)
	}
}

// certPEM is the CA a kubeconfig trusts for srv.
func certPEM(srv *httptest.Server) []byte {
	return pemOf(srv.Certificate().Raw)
}

// A tenant's kubeconfig for this same apiserver naming another tenant's namespace (with
// credentials that reach it) made the provider create, reimage and delete Machines there.
// Another namespace than the AnvilCluster's own is refused unless an AnvilClusterIdentity
// grants the pair.
func TestIdentityForAnotherNamespaceNeedsAGrant(t *testing.T) {
	env := startProvider(t)
	ctx := context.Background()
	attacker := namespace(t, env.Client, "tenant-a")
	victim := namespace(t, env.Client, "tenant-b")
	raw, err := env.AdminKubeconfig("powerful")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts[kc.CurrentContext].Namespace = victim
	if raw, err = clientcmd.Write(*kc); err != nil {
		t.Fatal(err)
	}
	newCluster(t, env.Client, attacker, "c", raw)
	newMachine(t, env.Client, attacker, "c", "m", "boot")
	if err := env.Client.Create(ctx, bootstrapData(attacker, "c", "boot")); err != nil {
		t.Fatal(err)
	}
	ac := &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "c"}}
	msg := awaitReady(t, env.Client, ac, infrav1.ReasonIdentityUnusable, 30*time.Second)
	if !strings.Contains(msg, "no AnvilClusterIdentity allows") {
		t.Fatalf("AnvilCluster: %q", msg)
	}
	awaitReady(t, env.Client, &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "m"}}, infrav1.ReasonIdentityUnusable, 30*time.Second)
	list := &computev1alpha1.MachineList{}
	if err := env.Client.List(ctx, list, client.InNamespace(victim)); err != nil || len(list.Items) != 0 {
		t.Fatalf("anvil Machines in %s: %d (%v)", victim, len(list.Items), err)
	}
	// The admin grants the pair: the same identity is used.
	grant := &infrav1.AnvilClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "a-to-b"},
		Spec: infrav1.AnvilClusterIdentitySpec{RemoteNamespace: victim, AllowedNamespaces: []string{attacker}}}
	if err := env.Client.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	awaitReady(t, env.Client, ac, infrav1.ReasonProvisioned, 30*time.Second)
}

// Four AnvilClusters whose identities name a server that accepts connections and never
// answers held every AnvilMachine worker: the provider held one lock across up to 30 s of
// remote I/O per identity, and the remote clients had no timeout. A local AnvilMachine of
// another namespace now gets its anvil Machine within 10 s.
func TestHangingIdentitiesDelayNoOtherCluster(t *testing.T) {
	env := startProvider(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	hang := namespace(t, env.Client, "hang")
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		newCluster(t, env.Client, hang, name, writeKubeconfig(t, "https://"+ln.Addr().String(), hang, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token = "t"
		}))
		newMachine(t, env.Client, hang, name, name, "boot")
	}
	if err := env.Client.Create(ctx, bootstrapData(hang, "h1", "boot")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the hanging identities are being connected to

	local := namespace(t, env.Client, "local")
	newCluster(t, env.Client, local, "c", nil)
	if err := env.Client.Create(ctx, bootstrapData(local, "c", "boot")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	newMachine(t, env.Client, local, "c", "m", "boot")
	for {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: local, Name: "m"}, &computev1alpha1.Machine{})
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no anvil Machine for the local AnvilMachine after %s (%v): the hanging identities hold the workers", time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("local anvil Machine made %s after its AnvilMachine, beside 4 hanging identities", time.Since(start).Round(time.Millisecond))
	msg := awaitReady(t, env.Client, &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hang, Name: "h1"}}, infrav1.ReasonIdentityUnusable, 30*time.Second)
	t.Logf("a hanging identity: %s", msg)
}
