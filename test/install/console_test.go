package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/test/testos"
)

// checkConsoleInCluster reads Machine default/name's console log through kube-apiserver
// and the manager's console server, until it holds want, and types at its console there
// (the test OS's serial terminal echoes; the log then holds what was typed): the path of
// docs/console.md with anvil installed by config/default and config/metal-site — the
// APIService, the Service onto every manager replica, the pool's poollet endpoint on the
// node's address.
func (s *site) checkConsoleInCluster(t *testing.T, name, want string) {
	t.Helper()
	s.env.WaitKubectlFor(t, s.kubeconfig, 3*time.Minute, "say the console API is Available", func(out string) bool { return out == "True" },
		"get", "apiservice", consoleapi.APIServiceName, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	logPath := "/apis/" + consoleapi.Group + "/" + consoleapi.Version + "/namespaces/default/machines/" + name + "/consolelog"
	s.env.WaitKubectlFor(t, s.kubeconfig, time.Minute, "hold "+strconv.Quote(want), func(out string) bool { return strings.Contains(out, want) },
		"get", "--raw", logPath)

	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, typing := io.Pipe()
	defer typing.Close()
	var out testos.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- consoleapi.Attach(ctx, cfg, "default", name, in, &out) }()
	typed := fmt.Sprintf("typed-in-a-cluster-%d", time.Now().UnixNano())
	if _, err := io.WriteString(typing, typed+"\r"); err != nil {
		t.Fatalf("typing at %s's console: %v", name, err)
	}
	for !strings.Contains(out.String(), typed) {
		select {
		case err := <-done:
			t.Fatalf("%s's console ended before echoing what was typed: %v; it printed:\n%s", name, err, out.String())
		case <-ctx.Done():
			t.Fatalf("%s's console did not echo %q within a minute; it printed:\n%s", name, typed, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	<-done
	s.env.WaitKubectlFor(t, s.kubeconfig, time.Minute, "hold what was typed", func(out string) bool { return strings.Contains(out, typed) },
		"get", "--raw", logPath)
}

// checkManagersShareTheirConsoleCertificate: every manager replica serves the console with
// the certificate in Secret anvil-console-serving, of the CA the APIService names. A
// replica that made its own would fail kube-apiserver's requests that the Service sends it.
func (s *site) checkManagersShareTheirConsoleCertificate(t *testing.T) {
	t.Helper()
	secret := consoleapi.ServingSecret
	ca, err := base64.StdEncoding.DecodeString(s.kubectl(t, "-n", secret.Namespace, "get", "secret", secret.Name, "-o", `jsonpath={.data.ca\.crt}`))
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := base64.StdEncoding.DecodeString(s.kubectl(t, "get", "apiservice", consoleapi.APIServiceName, "-o", "jsonpath={.spec.caBundle}"))
	if err != nil || string(bundle) != string(ca) {
		t.Errorf("the APIService's caBundle (%v) is not the CA in Secret %s", err, secret)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("Secret %s holds no CA certificate", secret)
	}
	var ips []string
	s.env.WaitKubectlFor(t, s.kubeconfig, 2*time.Minute, "name two replicas' addresses", func(out string) bool {
		ips = strings.Fields(out)
		return len(ips) == 2
	}, "-n", "anvil-system", "get", "pods", "-l", "app.kubernetes.io/component=controller-manager",
		"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}")
	for _, ip := range ips {
		// As kube-apiserver dials it: the Service's name, the APIService's CA.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort(ip, "8444"),
			&tls.Config{RootCAs: roots, ServerName: "anvil-console.anvil-system.svc", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Errorf("the manager replica at %s: %v", ip, err)
			continue
		}
		conn.Close()
	}
}
