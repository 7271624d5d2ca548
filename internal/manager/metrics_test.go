package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// The attack: anyone who reaches the manager's metrics port (a tenant's guest on the same
// host, a tenant with a token) reads metrics that describe every tenant's Machines. Only a
// token bound to the shipped anvil-metrics-reader ClusterRole may.
func TestMetricsNeedAReaderToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "anvil-system"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := env.InstallRBAC(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := env.InstallTenant(ctx, "system:serviceaccount:"+ns.Name+":tenant", ns.Name); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-" + ns.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "monitoring"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-metrics-reader"}}); err != nil {
		t.Fatal(err)
	}
	tenantToken, readerToken := token(t, ns.Name, "tenant"), token(t, ns.Name, "monitoring")

	o := DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), "0", true
	mgr, err := New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	url := "https://" + o.MetricsAddr + "/metrics"
	get := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The certificate is the manager's self-signed one; the test is about who is let in.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	// Wait for the endpoint to serve, as the reader.
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = get(readerToken)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the metrics reader got %d %.200s, want 200", code, body)
	}
	if want := "controller_runtime_"; !strings.Contains(body, want) {
		t.Errorf("the metrics reader's answer has no %s metrics: %.300s", want, body)
	}
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a tenant", tenantToken, http.StatusForbidden},
	} {
		if code, body := get(tc.token); code != tc.want {
			t.Errorf("%s got %d %.200s from the metrics endpoint, want %d", tc.who, code, body, tc.want)
		}
	}
	// A token the apiserver does not know: controller-runtime answers 500 "Authentication
	// failed" rather than 401; what matters is that nothing is served.
	if code, body := get("not-a-token"); code == http.StatusOK {
		t.Errorf("a made-up token got the metrics: %.200s", body)
	}
	// Plain HTTP is not served at all.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + o.MetricsAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP got %d from the metrics endpoint", resp.StatusCode)
		}
	}
}

// token is a bound token of a new ServiceAccount ns/name.
func token(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
