package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/test/harness"
)

// A workload control plane: a fresh bootstrap token authenticates as a bootstrapper of
// NodeBootstrapGroup, an expired one is refused, the serving certificate holds the extra
// name, and Stop ends kube-controller-manager with the rest.
func TestWorkloadTakesBootstrapTokens(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.Workload = &Workload{ControllerManagerPort: harness.FreePort(t), ServingNames: []string{"10.0.2.100", "api.workload.test"}}
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	admin := kubernetes.NewForConfigOrDie(cp.RESTConfig())

	fresh, err := CreateBootstrapToken(ctx, admin, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired, err := CreateBootstrapToken(ctx, admin, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	asToken := func(token string) kubernetes.Interface {
		c := rest.AnonymousClientConfig(cp.RESTConfig())
		c.BearerToken = token
		return kubernetes.NewForConfigOrDie(c)
	}
	review, err := asToken(fresh).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the fresh bootstrap token: %v", err)
	}
	id, _, _ := strings.Cut(fresh, ".")
	if u := review.Status.UserInfo; u.Username != "system:bootstrap:"+id || !slices.Contains(u.Groups, NodeBootstrapGroup) {
		t.Errorf("the fresh token is %s in %v, want system:bootstrap:%s in %s", u.Username, u.Groups, id, NodeBootstrapGroup)
	}
	_, err = asToken(expired).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("the expired bootstrap token: err = %v, want 401 Unauthorized", err)
	}

	caPEM, err := os.ReadFile(cp.pki.caCert())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, name := range cfg.Workload.ServingNames {
		conn, err := tls.Dial("tcp", cp.RESTConfig().Host[len("https://"):], &tls.Config{RootCAs: pool, ServerName: name})
		if err != nil {
			t.Errorf("the apiserver's certificate for %s: %v", name, err)
			continue
		}
		conn.Close()
	}

	kcm := cp.ControllerManagerPID()
	if kcm == 0 {
		t.Fatal("no kube-controller-manager pid")
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(kcm))); err == nil {
		t.Errorf("kube-controller-manager (pid %d) still exists after Stop", kcm)
	}
}

func TestWorkloadRefusesBadServingName(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Workload = &Workload{ControllerManagerPort: harness.FreePort(t), ServingNames: []string{"not a name"}}
	_, err := Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "Workload.ServingNames") {
		t.Fatalf("err = %v, want one naming Workload.ServingNames", err)
	}
}

// A Workload control plane on another address of the host: the apiserver serves there
// (and only there) with a certificate naming it, and a client certificate from
// ClientConfig authenticates as the user and groups asked for, as a kubelet's would.
func TestWorkloadOnAddressTakesClientCertificates(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.Address = "127.0.0.2"
	cfg.Workload = &Workload{ControllerManagerPort: harness.FreePort(t)}
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if want := "https://127.0.0.2:" + strconv.Itoa(cfg.APIServerPort); cp.RESTConfig().Host != want {
		t.Errorf("the admin's host is %s, want %s", cp.RESTConfig().Host, want)
	}
	if conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.APIServerPort))); err == nil {
		conn.Close()
		t.Error("the apiserver also answers on 127.0.0.1")
	}
	node, err := cp.ClientConfig("system:node:n1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	review, err := kubernetes.NewForConfigOrDie(node).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != "system:node:n1" || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("the client certificate is %s in %v, want system:node:n1 in system:nodes", u.Username, u.Groups)
	}
}
