package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
)

// consoleLogPath is the sample Machine web-1's console log through kube-apiserver.
const consoleLogPath = "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/default/machines/web-1/consolelog"

// checkConsoleLog reads the sample Machine's console log through the API as anvil dev
// serves it (docs/console.md): the admin and a tenant of the namespace read it; a viewer
// of the namespace, a user with no grant, and a caller that skips kube-apiserver to name
// itself in the front proxy's headers are refused.
func checkConsoleLog(t *testing.T, kubeconfig string) {
	t.Helper()
	env.WaitKubectlFor(t, kubeconfig, time.Minute, "hold the fake machine's boot line",
		func(out string) bool {
			return strings.Contains(out, "fake machine ") && strings.Contains(out, ": running")
		},
		"get", "--raw", consoleLogPath)
	for _, binding := range [][]string{
		{"console-tenant", "anvil-tenant"}, {"console-viewer", "anvil-tenant-view"},
	} {
		out, err := env.Kubectl(t, kubeconfig, "", "create", "rolebinding", binding[0], "-n", "default", "--clusterrole", binding[1], "--user", binding[0])
		if err != nil && !strings.Contains(out, "already exists") {
			t.Fatalf("kubectl create rolebinding: %v\n%s", err, out)
		}
	}
	if out, err := env.Kubectl(t, kubeconfig, "", "get", "--raw", consoleLogPath+"?tailLines=1", "--as", "console-tenant"); err != nil ||
		!strings.Contains(out, ": running") || strings.Count(strings.TrimSuffix(out, "\n"), "\n") != 0 {
		t.Errorf("the namespace's tenant reading the last line of the console log: %v\n%s", err, out)
	}
	for _, user := range []string{"console-viewer", "nobody-at-all"} {
		out, err := env.Kubectl(t, kubeconfig, "", "get", "--raw", consoleLogPath, "--as", user)
		if err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("%s reading the console log: %v\n%s, want forbidden", user, err, out)
		}
	}
	// sinceSeconds: the boot line, written three seconds ago or more by now, is in the last
	// hour and not in the last second (the fake writes nothing else while it runs).
	time.Sleep(3 * time.Second)
	if out, err := env.Kubectl(t, kubeconfig, "", "get", "--raw", consoleLogPath+"?sinceSeconds=3600"); err != nil || !strings.Contains(out, ": running") {
		t.Errorf("sinceSeconds=3600: %v\n%s, want the boot line", err, out)
	}
	if out, err := env.Kubectl(t, kubeconfig, "", "get", "--raw", consoleLogPath+"?sinceSeconds=1"); err != nil || strings.Contains(out, ": running") {
		t.Errorf("sinceSeconds=1: %v\n%s, want nothing of the boot", err, out)
	}
	if out, err := env.Kubectl(t, kubeconfig, "", "get", "--raw", consoleLogPath+"?sinceSeconds=-1"); err == nil || !strings.Contains(out, "sinceSeconds must be a whole number") {
		t.Errorf("sinceSeconds=-1: %v\n%s, want a refusal saying what to fix", err, out)
	}

	// Straight to the console server, claiming to be the admin in the headers only
	// kube-apiserver's front proxy may set, or with a made-up token.
	port, err := env.Kubectl(t, kubeconfig, "", "get", "service", "anvil-console", "-n", "anvil-system", "-o", "jsonpath={.spec.ports[0].port}")
	if err != nil {
		t.Fatalf("the console server's Service: %v\n%s", err, port)
	}
	// A real token of a ServiceAccount with no grant: kube-apiserver would refuse it, and
	// so must the console server on its own.
	if out, err := env.Kubectl(t, kubeconfig, "", "create", "serviceaccount", "console-nobody", "-n", "default"); err != nil && !strings.Contains(out, "already exists") {
		t.Fatalf("kubectl create serviceaccount: %v\n%s", err, out)
	}
	token, err := env.Kubectl(t, kubeconfig, "", "create", "token", "console-nobody", "-n", "default")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, token)
	}
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for what, tc := range map[string]struct {
		header http.Header
		code   int
	}{
		"front-proxy headers without its certificate": {http.Header{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}}, http.StatusUnauthorized},
		"a made-up bearer token":                      {http.Header{"Authorization": {"Bearer made-up"}}, http.StatusUnauthorized},
		"the token of a ServiceAccount with no grant": {http.Header{"Authorization": {"Bearer " + strings.TrimSpace(token)}}, http.StatusForbidden},
	} {
		req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+port+consoleLogPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = tc.header
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || strings.Contains(string(body), "running") {
			t.Errorf("%s, straight to the console server: %d %s, want %d and no log", what, resp.StatusCode, body, tc.code)
		}
	}
}

// checkConsole attaches to the sample Machine's console with anvil console, as a user
// would: what is typed comes back (the fake echoes), a second writer is refused while the
// first keeps the console, a watcher (--read-only) sees the typing, Ctrl-] ends the
// session, and a viewer of the namespace cannot attach.
func checkConsole(t *testing.T, kubeconfig string) {
	t.Helper()
	writer := env.StartConsole(t, kubeconfig, "default", "web-1")
	writer.Await(t, "attached; Ctrl-]")
	watcher := env.StartConsole(t, kubeconfig, "default", "web-1", "--read-only")
	watcher.Await(t, "attached; Ctrl-]")
	second := exec.Command(env.AnvilBin, "console", "web-1", "--kubeconfig", kubeconfig, "-n", "default")
	second.Stdin = strings.NewReader("")
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "has a writer already") {
		t.Errorf("a second writer: %v\n%s, want a refusal saying the console has a writer", err, out)
	}
	token := fmt.Sprintf("typed-%d", time.Now().UnixNano())
	if _, err := io.WriteString(writer.Stdin, token+"\r"); err != nil {
		t.Fatal(err)
	}
	writer.Await(t, token)
	watcher.Await(t, token)
	if _, err := writer.Stdin.Write([]byte{0x1d}); err != nil { // Ctrl-]
		t.Fatal(err)
	}
	if err := writer.Wait(t); err != nil {
		t.Errorf("anvil console after Ctrl-]: %v\n%s", err, writer.Output())
	}
	watcher.Stop()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "console-viewer"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := consoleapi.Attach(ctx, cfg, "default", "web-1", nil, io.Discard); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a viewer of the namespace attaching: %v, want forbidden", err)
	}
}
