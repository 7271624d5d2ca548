package ui

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// A Machine on the fake pool: Running within seconds.
const liveMachine = `
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  machineClassRef: {name: small}
  image: 127.0.0.1:PORT/anvil/testos:latest
  machinePoolSelector: {compute.anvil.dev/runtime: fake}
`

func machineYAML(namespace, name, port string) string {
	return strings.NewReplacer("NAMESPACE", namespace, "NAME", name, "PORT", port).Replace(liveMachine)
}

var uiURL = regexp.MustCompile(`(?m)^\s*fleet UI\s+(http://\S+)$`)

// TestFleetUI runs anvil dev with its four pools (fake, QEMU amd64 and arm64, metal with an
// emulated server) and the sample OSImage, and reads its fleet UI in headless Chromium:
// what each page shows, that it follows changes without a reload, and what a tenant's own
// anvil ui leaves out. Each page's screenshot is kept among the test's artifacts.
func TestFleetUI(t *testing.T) {
	state, err := os.MkdirTemp("", "ui") // short: QMP sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		devproc.KillQemu(state)
		if err := bmcemu.PowerOffAll(dev.EmulatedServersDir(state)); err != nil {
			t.Errorf("ending the emulated servers: %v", err)
		}
		os.RemoveAll(state)
	})
	port := devproc.FreePort(t)
	samples := env.Samples(t, "config/samples", port)
	d := env.StartDev(t, "--state-dir", state, "--bin-dir", env.BinDir,
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", port, "--metal-image-port", devproc.FreePort(t), "--bmc-port", devproc.FreePort(t),
		"--emulated-servers", "1", "--emulated-arm64-servers", "0",
		"--test-os", testos.Dir(t), "--agents", filepath.Join(env.RepoRoot, "bin", "build-agent"))
	kubeconfig := filepath.Join(state, "kubeconfig")
	env.Apply(t, kubeconfig, readFile(t, filepath.Join(samples, "compute_v1alpha1_machineclass.yaml")))
	m := uiURL.FindStringSubmatch(d.Output())
	if m == nil {
		t.Fatalf("anvil dev printed no fleet UI address:\n%s", d.Output())
	}
	b := newBrowser(t)
	b.do(time.Minute, "opening "+m[1], chromedp.Navigate(m[1]))
	b.waitJS(time.Minute, "the first rows", `document.body.dataset.synced === "true"`)

	t.Run("the fleet page shows each pool under each of its architectures", func(t *testing.T) { fleetPage(t, b, kubeconfig) })
	t.Run("a Machine made with kubectl appears and turns Running without a reload", func(t *testing.T) { liveMachines(t, b, kubeconfig, port) })
	env.Apply(t, kubeconfig, readFile(t, filepath.Join(samples, "images_v1alpha1_osimage.yaml")))
	t.Run("the servers page shows the emulated server and never its BMC", func(t *testing.T) { serversPage(t, b, kubeconfig) })
	t.Run("a build shows both architectures progressing, then the published index", func(t *testing.T) { buildsPage(t, b, kubeconfig) })
	t.Run("a tenant's anvil ui shows its namespace's Machines only, and no server", func(t *testing.T) { tenantUI(t, b, kubeconfig, port) })
	t.Run("only loopback names and the session's token are let in", func(t *testing.T) { guard(t, m[1]) })
	b.open("#/clusters")
	b.waitJS(10*time.Second, "the clusters page", `document.querySelector("h1").textContent === "Clusters"`)
	b.screenshot("clusters")
}

// fleetPage: every pool kubectl lists is drawn once under each architecture its status
// names, with its kind.
func fleetPage(t *testing.T, b *browser, kubeconfig string) {
	want := map[string]string{"dev-fake": "fake", "dev-qemu-amd64": "qemu", "dev-qemu-arm64": "qemu", "dev-metal": "metal"}
	archs := map[string][]string{}
	env.WaitKubectlFor(t, kubeconfig, 3*time.Minute, "report their architectures", func(out string) bool {
		archs = map[string][]string{}
		for _, line := range strings.Split(out, "\n") {
			name, list, _ := strings.Cut(line, "=")
			if list != "" {
				archs[name] = strings.Fields(list)
			}
		}
		for pool := range want {
			if len(archs[pool]) == 0 {
				return false
			}
		}
		return true
	}, "get", "machinepools", "-o", `jsonpath={range .items[*]}{.metadata.name}={range .status.architectures[*]}{@} {end}{"\n"}{end}`)
	b.open("#/fleet")
	for pool, kind := range want {
		for _, arch := range archs[pool] {
			b.waitJS(time.Minute, pool+" under "+arch,
				fmt.Sprintf(`!!document.querySelector('section[data-arch=%q] article[data-pool=%q][data-kind=%q]')`, arch, pool, kind))
		}
		n := eval[int](b, fmt.Sprintf(`document.querySelectorAll('article[data-pool=%q]').length`, pool))
		if n != len(archs[pool]) {
			t.Errorf("pool %s is drawn %d times; its architectures are %v", pool, n, archs[pool])
		}
	}
	if archs["dev-qemu-arm64"][0] != "arm64" || archs["dev-qemu-amd64"][0] != "amd64" {
		t.Errorf("architectures %v: the QEMU pools are not their own", archs)
	}
	b.screenshot("fleet")
}

// liveMachines: a Machine applied while the machines page is open appears, then shows
// Running, in the same document.
func liveMachines(t *testing.T, b *browser, kubeconfig, port string) {
	b.open("#/machines")
	eval[bool](b, `window.sameDocument = true`)
	env.Apply(t, kubeconfig, machineYAML("default", "ui-live", port))
	b.waitJS(time.Minute, "ui-live's row", `!!document.querySelector('tr[data-machine="default/ui-live"]')`)
	b.waitJS(2*time.Minute, "ui-live Running", `!!document.querySelector('tr[data-machine="default/ui-live"][data-state="Running"]')`)
	if !eval[bool](b, `window.sameDocument === true`) {
		t.Fatal("the page was loaded again")
	}
	b.screenshot("machines")
	b.do(10*time.Second, "opening ui-live", chromedp.Click(chromedp.CSS(`tr[data-machine="default/ui-live"] a`)))
	b.waitJS(time.Minute, "its conditions", `!!document.querySelector('dl[data-machine="default/ui-live"]') && !!document.querySelector('tr[data-condition="Ready"]')`)
	b.waitJS(time.Minute, "its Events", `!!document.querySelector('tr[data-event-reason="Scheduled"]') && !!document.querySelector('tr[data-event-reason="Started"]')`)
	// Typing at its console from the page: the fake runtime's console echoes, and the log
	// the page follows shows it.
	const input = `input[aria-label="a line to type at the console"]`
	b.do(10*time.Second, "attaching", chromedp.Click(chromedp.CSS(`main form button`)))
	b.waitJS(30*time.Second, "the console attached", fmt.Sprintf(`!document.querySelector('%s').disabled`, input))
	b.do(10*time.Second, "typing", chromedp.SendKeys(chromedp.CSS(input), "typed-from-the-page\r"))
	b.waitJS(30*time.Second, "the echo in the log", `document.querySelector('pre[aria-label="console log"]').textContent.includes("typed-from-the-page")`)
	b.screenshot("machine")
}

// serversPage: the Host is listed with its state; nothing the page received names its
// BMC's address.
func serversPage(t *testing.T, b *browser, kubeconfig string) {
	bmc, err := env.Kubectl(t, kubeconfig, "", "get", "hosts", "-n", "anvil-metal", "-o", "jsonpath={.items[0].metadata.name} {.items[0].spec.bmc.address}")
	name, address, ok := strings.Cut(strings.TrimSpace(bmc), " ")
	if err != nil || !ok || address == "" {
		t.Fatalf("the emulated server's Host: %q %v", bmc, err)
	}
	b.open("#/servers")
	b.waitJS(time.Minute, "its Host", fmt.Sprintf(`!!document.querySelector('tr[data-host="anvil-metal/%s"]')`, name))
	feed := snapshot(b)
	host, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(address, "redfish+http://"), "redfish-virtualmedia+http://"), "/")
	if !strings.Contains(feed, `"kind":"host"`) || strings.Contains(feed, address) || strings.Contains(feed, host) || strings.Contains(feed, "credentials") {
		t.Errorf("the feed's snapshot has no Host, or names its BMC (%s) or credentials:\n%s", address, feed)
	}
	b.screenshot("servers")
}

// buildsPage: the sample OSImage's build shows each architecture in a phase before the
// end, then both done and the index kubectl reads.
func buildsPage(t *testing.T, b *browser, kubeconfig string) {
	b.open("#/images")
	b.waitJS(2*time.Minute, "built-os's build", `document.querySelectorAll('section[data-image="default/built-os"] tr[data-build-arch]').length === 2`)
	progressing := map[string]bool{}
	deadline := time.Now().Add(20 * time.Minute)
	for {
		phases := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('section[data-image="default/built-os"] tr[data-build-arch]')].map((tr) => [tr.dataset.buildArch, tr.dataset.phase]))`)
		for arch, phase := range phases {
			switch phase {
			case "Scheduling", "Building": // Pending is also what a build without status shows
				progressing[arch] = true
			case "Failed":
				t.Fatalf("the %s build failed:\n%s", arch, b.text())
			}
		}
		if phases["amd64"] == "Succeeded" && phases["arm64"] == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the builds did not both succeed: %v\n%s", phases, b.text())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !progressing["amd64"] || !progressing["arm64"] {
		t.Errorf("the page never showed a build in progress: %v", progressing)
	}
	env.WaitKubectlFor(t, kubeconfig, time.Minute, "have an index", func(s string) bool { return strings.HasPrefix(s, "sha256:") },
		"get", "osimage", "built-os", "-o", "jsonpath={.status.index}")
	index, _ := env.Kubectl(t, kubeconfig, "", "get", "osimage", "built-os", "-o", "jsonpath={.status.index}")
	b.waitJS(time.Minute, "the published index", fmt.Sprintf(`document.querySelector('section[data-image="default/built-os"] dd[data-index]').dataset.index === %q`, strings.TrimSpace(index)))
	b.screenshot("images")
}

// tenantUI: a ServiceAccount bound to anvil-tenant in its namespace runs its own anvil ui;
// it sees its Machine, not the default namespace's, and no server.
func tenantUI(t *testing.T, admin *browser, kubeconfig, port string) {
	env.Apply(t, kubeconfig, `
apiVersion: v1
kind: Namespace
metadata: {name: tenant-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ui-user, namespace: tenant-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ui-user, namespace: tenant-a}
subjects: [{kind: ServiceAccount, name: ui-user, namespace: tenant-a}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: anvil-tenant}
`+"---"+machineYAML("tenant-a", "tenant-vm", port))
	token, err := env.Kubectl(t, kubeconfig, "", "create", "token", "ui-user", "-n", "tenant-a")
	if err != nil {
		t.Fatalf("token: %v %s", err, token)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile, cfg.BearerToken = nil, nil, "", "", strings.TrimSpace(token)
	tenantConfig := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	if err := controlplane.WriteKubeconfig(tenantConfig, cfg); err != nil {
		t.Fatal(err)
	}
	url := startUI(t, "--kubeconfig", tenantConfig, "-n", "tenant-a", "--address", "127.0.0.1:0")

	ctx, cancel := chromedp.NewContext(admin.ctx) // a tab of the same browser
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // the tab's first run: no timeout on it
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx}
	b.do(time.Minute, "opening the tenant's UI", chromedp.Navigate(url))
	b.waitJS(time.Minute, "the first rows", `document.body.dataset.synced === "true"`)
	b.open("#/machines")
	b.waitJS(2*time.Minute, "tenant-vm", `!!document.querySelector('tr[data-machine="tenant-a/tenant-vm"]')`)
	seen := eval[[]string](b, `[...document.querySelectorAll("tr[data-machine]")].map((tr) => tr.dataset.machine)`)
	for _, m := range seen {
		if !strings.HasPrefix(m, "tenant-a/") {
			t.Errorf("the tenant's UI shows Machine %s", m)
		}
	}
	servers := eval[struct {
		Hidden  bool `json:"hidden"`
		Watched bool `json:"watched"`
	}](b, `fetch("api/me").then((r) => r.json()).then((me) => ({hidden: document.querySelector('nav a[data-page="servers"]').hidden,
		watched: !!(me.scope.host.all || (me.scope.host.namespaces || []).length)}))`)
	if !servers.Hidden || servers.Watched {
		t.Errorf("the tenant's UI: servers link hidden %v, Hosts watched %v; want hidden and not watched", servers.Hidden, servers.Watched)
	}
	// What the tenant's browser receives: no Host, and no Machine of another namespace.
	if feed := snapshot(b); !strings.Contains(feed, `"key":"tenant-a/tenant-vm"`) || strings.Contains(feed, `"kind":"host"`) || strings.Contains(feed, `"key":"default/`) {
		t.Errorf("the tenant's feed holds a Host or another namespace's object, or not its Machine:\n%s", feed)
	}
	b.screenshot("tenant-machines")
}

// startUI runs anvil ui with args until the test ends and returns the address it prints.
func startUI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.AnvilBin, append([]string{"ui"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "anvil ui: open "); ok {
				lines <- url
			}
		}
	}()
	select {
	case url := <-lines:
		return url
	case <-time.After(time.Minute):
		t.Fatalf("anvil ui printed no address within a minute:\n%s", stderr.String())
		return ""
	}
}

// guard: without the token, by another host name (a rebinding page), by another method, or
// naming an object by a path, nothing is served.
func guard(t *testing.T, url string) {
	host, _, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	for _, tc := range []struct {
		name, method, url, host string
		want                    int
	}{
		{"no token", http.MethodGet, "http://" + host + "/api/feed", "", http.StatusUnauthorized},
		{"a wrong token", http.MethodGet, "http://" + host + "/s/0123/api/me", "", http.StatusUnauthorized},
		{"another host name, with the token", http.MethodGet, url + "api/me", "ui.attacker.example", http.StatusForbidden},
		{"a POST, with the token", http.MethodPost, url + "api/me", "", http.StatusMethodNotAllowed},
		{"a namespace that is a path", http.MethodGet, url + "api/consolelog?namespace=..&name=x", "", http.StatusBadRequest},
		{"a name that is a path", http.MethodGet, url + "api/events?kind=Machine&namespace=default&name=a%2F..%2F..", "", http.StatusBadRequest},
		{"the token", http.MethodGet, url + "api/me", "", http.StatusOK},
		// A page elsewhere opening the console's WebSocket (a browser lets any page do so).
		{"the console from another origin", http.MethodGet, url + "api/console?namespace=default&name=ui-live", "", http.StatusForbidden},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, tc.method, tc.url, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		if strings.Contains(tc.url, "api/console?") {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			req.Header.Set("Origin", "http://ui.attacker.example")
		}
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if len(resp.Cookies()) != 0 {
			t.Errorf("%s: a cookie was set (%v): any other server on 127.0.0.1 would receive it", tc.name, resp.Cookies())
		}
	}
}

// snapshot is the feed's first message as the page's session reads it: every row it sends.
func snapshot(b *browser) string {
	b.t.Helper()
	return eval[string](b, `fetch("api/feed").then(async (r) => {
		const rd = r.body.getReader(), dec = new TextDecoder();
		let text = "";
		while (!text.includes("\n\n")) { const { value, done } = await rd.read(); if (done) break; text += dec.decode(value, { stream: true }); }
		rd.cancel();
		return text;
	})`)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
