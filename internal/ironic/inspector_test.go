package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ironic-inspector answers on its own loopback port only with its credentials, and is
// started again (with its schema when the database was lost) after it dies, while Ironic
// runs on untouched.
func TestInspectorAnswersOnlyAuthenticatedAndRestarts(t *testing.T) {
	irc := startTest(t, nil)
	ep := irc.InspectorEndpoint()
	if !strings.HasPrefix(ep, "http://127.0.0.1:") || !strings.HasSuffix(ep, "/") || ep == irc.Endpoint() {
		t.Errorf("InspectorEndpoint() = %q, want http://127.0.0.1:PORT/ apart from Ironic's %s", ep, irc.Endpoint())
	}
	list := ep + "v1/introspection"
	if code, body := get(t, list, ironicInspectorUser, irc.secrets.toInspector); code != http.StatusOK {
		t.Errorf("authenticated GET /v1/introspection = %d %s, want 200", code, body)
	}
	if code, _ := get(t, list, "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/introspection without credentials = %d, want 401", code)
	}
	if code, _ := get(t, list, ironicInspectorUser, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/introspection with a wrong password = %d, want 401", code)
	}
	// Ironic's caller's credentials are Ironic's, not ironic-inspector's.
	if code, _ := get(t, list, "anvil", "test-password"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/introspection with Ironic's credentials = %d, want 401", code)
	}

	ironicPID := irc.PID()
	for round, loseDB := range []bool{false, true} {
		pid := irc.InspectorPID()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if loseDB {
			if err := os.Remove(irc.p.insp.db); err != nil {
				t.Fatal(err)
			}
		}
		waitInspectorRestarted(t, irc, pid)
		if irc.InspectorEndpoint() != ep {
			t.Errorf("ironic-inspector's endpoint changed from %s to %s", ep, irc.InspectorEndpoint())
		}
		if got := irc.inspector.Restarts(); got < round+1 {
			t.Errorf("ironic-inspector's Restarts() = %d, want at least %d", got, round+1)
		}
	}
	if code, body := get(t, list, ironicInspectorUser, irc.secrets.toInspector); code != http.StatusOK || !strings.Contains(body, `"introspection":[]`) {
		t.Errorf("GET /v1/introspection after the database was lost = %d %s, want 200 and none", code, body)
	}
	if irc.PID() != ironicPID || irc.Restarts() != 0 {
		t.Errorf("Ironic was restarted with ironic-inspector (pid %d -> %d, restarts %d)", ironicPID, irc.PID(), irc.Restarts())
	}
}

// waitInspectorRestarted waits until a new ironic-inspector answers.
func waitInspectorRestarted(t *testing.T, irc *Ironic, oldPID int) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 90*time.Second {
		if pid := irc.InspectorPID(); pid != 0 && pid != oldPID && irc.inspectorHealthy(context.Background()) {
			t.Logf("ironic-inspector restarted as pid %d after %s", pid, time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("ironic-inspector did not come back within 90s; log:\n%s", tail(irc.InspectorLogPath(), 30))
}

// Ironic accepts the inspect interface "inspector", and inspecting a node reaches
// ironic-inspector, which knows the node and has Ironic boot it for the agent ramdisk.
// That is as far as it goes here: the node waits ("inspect wait") for a ramdisk that
// would boot over PXE on real hardware and post its findings to /v1/continue. A
// fake-hardware node is used because its power and boot device can be set without a
// BMC; internal/provisioner/ironic's TestIPMIInspectionGoesThroughInspector does the
// same for an ipmi:// node behind an emulated IPMI BMC.
func TestInspectionReachesInspector(t *testing.T) {
	irc := startTest(t, nil)
	api := func(method, path string, body any, out any) int {
		t.Helper()
		return call(t, irc.Endpoint()+path, "anvil", "test-password", method, body, out)
	}
	var node struct {
		UUID             string `json:"uuid"`
		ProvisionState   string `json:"provision_state"`
		PowerState       string `json:"power_state"`
		InspectInterface string `json:"inspect_interface"`
		LastError        any    `json:"last_error"`
	}
	if code := api(http.MethodPost, "v1/nodes", map[string]any{"name": "i1", "driver": "fake-hardware",
		"inspect_interface": "inspector"}, &node); code != http.StatusCreated {
		t.Fatalf("creating a node with the inspector inspect interface: %d", code)
	}
	// ironic-inspector finds the ramdisk's report by the node's MACs (or its BMC address).
	if code := api(http.MethodPost, "v1/ports", map[string]any{"node_uuid": node.UUID, "address": "52:54:00:12:34:56"}, nil); code != http.StatusCreated {
		t.Fatalf("creating a port: %d", code)
	}
	var validate map[string]struct {
		Result bool `json:"result"`
		Reason any  `json:"reason"`
	}
	api(http.MethodGet, "v1/nodes/i1/validate", nil, &validate)
	if !validate["inspect"].Result {
		t.Errorf("Ironic does not validate the inspect interface: %+v", validate["inspect"])
	}
	waitNode := func(want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			api(http.MethodGet, "v1/nodes/i1", nil, &node)
			if node.ProvisionState == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if node.ProvisionState != want {
			t.Fatalf("node is %q (last error %v), want %q; ironic-inspector.log ends with:\n%s",
				node.ProvisionState, node.LastError, want, tail(irc.InspectorLogPath(), 20))
		}
	}
	if code := api(http.MethodPut, "v1/nodes/i1/states/provision", map[string]string{"target": "manage"}, nil); code != http.StatusAccepted {
		t.Fatalf("manage: %d", code)
	}
	waitNode("manageable")
	if code := api(http.MethodPut, "v1/nodes/i1/states/provision", map[string]string{"target": "inspect"}, nil); code != http.StatusAccepted {
		t.Fatalf("inspect: %d", code)
	}
	waitNode("inspect wait")

	// ironic-inspector was asked (by Ironic, with ironic-inspector's credentials) and
	// waits for the ramdisk, after having Ironic (with its own user there) set the boot
	// device and reboot the node.
	var status struct {
		Finished bool   `json:"finished"`
		State    string `json:"state"`
		Error    any    `json:"error"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code := call(t, irc.InspectorEndpoint()+"v1/introspection/"+node.UUID, ironicInspectorUser, irc.secrets.toInspector, http.MethodGet, nil, &status)
		if code == http.StatusOK && status.State == "waiting" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if status.State != "waiting" || status.Finished || status.Error != nil {
		t.Fatalf("ironic-inspector's introspection of %s: %+v, want waiting for the ramdisk; its log ends with:\n%s",
			node.UUID, status, tail(irc.InspectorLogPath(), 20))
	}
	api(http.MethodGet, "v1/nodes/i1", nil, &node)
	if node.PowerState != "power on" || node.ProvisionState != "inspect wait" {
		t.Errorf("node after ironic-inspector started: power %q, state %q; want power on, inspect wait", node.PowerState, node.ProvisionState)
	}
}

// call sends a JSON request with basic auth and decodes a JSON answer into out.
func call(t *testing.T, url, user, password, method string, body, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.82")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, url, b, err)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %s %s", method, url, resp.Status, b)
	}
	return resp.StatusCode
}

func TestRenderInspectorConfig(t *testing.T) {
	c := Config{Host: "127.0.0.1", Port: 1234, InspectorPort: 1236, Username: "anvil", Password: "caller-password"}
	got := renderInspectorConfig(c, pathsIn("/s"), secrets{toInspector: "to-inspector", toIronic: "to-ironic"})
	for _, want := range []string{
		"standalone = true", "transport_url = fake://", "listen_address = 127.0.0.1", "listen_port = 1236",
		"auth_strategy = http_basic", "http_basic_auth_user_file = /s/inspector-htpasswd",
		"connection = sqlite:////s/inspector.db", "driver = noop", "store_data = database",
		"[ironic]", "auth_type = http_basic", "username = anvil-ironic-inspector", "password = to-ironic",
		"endpoint_override = http://127.0.0.1:1234",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("inspector.conf lacks %q:\n%s", want, got)
		}
	}
	for _, secret := range []string{"caller-password", "to-inspector"} {
		if strings.Contains(got, secret) {
			t.Errorf("inspector.conf holds %q, a password it has no use for", secret)
		}
	}
}

// An ironic-inspector that cannot start (its port taken) fails Start with its name and
// the end of its log, and leaves no Ironic behind.
func TestStartFailsWhenInspectorCannotStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	irc, err := Start(ctx, Config{StateDir: dir, Username: "anvil", Password: "test-password",
		InspectorPort: taken.Addr().(*net.TCPAddr).Port, StartTimeout: 30 * time.Second})
	if err == nil {
		irc.Stop()
		t.Fatal("Start succeeded with ironic-inspector's port taken")
	}
	if !strings.Contains(err.Error(), "ironic-inspector") {
		t.Errorf("Start: %v, want an error naming ironic-inspector", err)
	}
	t.Logf("Start: %v", err)
	b, err := os.ReadFile(filepath.Join(dir, "ironic.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("Ironic's process group %d still exists after the failed Start (kill -0: %v)", pid, err)
	}
}
