package ironic

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// startTest starts Ironic in a temporary directory and stops it when the test ends.
func startTest(t *testing.T, mod func(*Config)) *Ironic {
	t.Helper()
	cfg := Config{
		StateDir:       t.TempDir(),
		Username:       "anvil",
		Password:       "test-password",
		Logger:         testr.New(t),
		HealthInterval: time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	irc, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Ironic answered %s after Start", time.Since(start).Round(time.Millisecond))
	t.Cleanup(irc.Stop)
	return irc
}

func get(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestStartAnswersOnlyAuthenticated(t *testing.T) {
	irc := startTest(t, nil)
	if !strings.HasPrefix(irc.Endpoint(), "http://127.0.0.1:") || !strings.HasSuffix(irc.Endpoint(), "/") {
		t.Errorf("Endpoint() = %q, want http://127.0.0.1:PORT/", irc.Endpoint())
	}
	nodes := irc.Endpoint() + "v1/nodes"
	if code, body := get(t, nodes, "anvil", "test-password"); code != http.StatusOK {
		t.Errorf("authenticated GET /v1/nodes = %d %s, want 200", code, body)
	}
	if code, _ := get(t, nodes, "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/nodes without credentials = %d, want 401", code)
	}
	if code, _ := get(t, nodes, "anvil", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/nodes with a wrong password = %d, want 401", code)
	}
	for _, f := range []string{"ironic.conf", "htpasswd", "inspector.conf", "inspector-htpasswd"} {
		b, err := os.ReadFile(irc.p.dir + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "test-password") {
			t.Errorf("%s holds the password in clear", f)
		}
	}
	if code, body := get(t, irc.Endpoint()+"v1/drivers", "anvil", "test-password"); !strings.Contains(body, `"redfish"`) || !strings.Contains(body, `"ipmi"`) || !strings.Contains(body, `"fake-hardware"`) {
		t.Errorf("GET /v1/drivers = %d %s, want fake-hardware, redfish and ipmi", code, body)
	}
}

// waitRestarted waits until a new process answers on the same endpoint.
func waitRestarted(t *testing.T, irc *Ironic, oldPID int) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 90*time.Second {
		if pid := irc.PID(); pid != 0 && pid != oldPID && irc.Healthy(context.Background()) {
			t.Logf("restarted as pid %d after %s (restarts=%d)", pid, time.Since(start).Round(time.Millisecond), irc.Restarts())
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Ironic did not come back within 90s; log:\n%s", tail(irc.LogPath(), 30))
}

func TestRestartAfterKill(t *testing.T) {
	irc := startTest(t, nil)
	endpoint, pid := irc.Endpoint(), irc.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, irc, pid)
	if irc.Endpoint() != endpoint {
		t.Errorf("endpoint changed from %s to %s", endpoint, irc.Endpoint())
	}
	if irc.Restarts() < 1 {
		t.Errorf("Restarts() = %d, want at least 1", irc.Restarts())
	}
}

func TestRestartAfterKillAndDatabaseLost(t *testing.T) {
	irc := startTest(t, nil)
	// A node in the old database, to see the new one empty.
	req, _ := http.NewRequest(http.MethodPost, irc.Endpoint()+"v1/nodes", strings.NewReader(`{"name":"n1","driver":"fake-hardware"}`))
	req.SetBasicAuth("anvil", "test-password")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.82")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a node: %s", resp.Status)
	}
	pid := irc.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(irc.p.db); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, irc, pid)
	if code, body := get(t, irc.Endpoint()+"v1/nodes", "anvil", "test-password"); code != http.StatusOK || !strings.Contains(body, `"nodes": []`) {
		t.Errorf("GET /v1/nodes after the database was lost = %d %s, want 200 and no nodes", code, body)
	}
}

// The database removed under a running Ironic: requests fail, the health check restarts it.
func TestRestartAfterDatabaseLostWhileRunning(t *testing.T) {
	irc := startTest(t, nil)
	pid := irc.PID()
	if err := os.Remove(irc.p.db); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, irc, pid)
}

func TestStopLeavesNoProcess(t *testing.T) {
	irc := startTest(t, nil)
	pids := []int{irc.PID(), irc.InspectorPID()}
	irc.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	if irc.PID() != 0 || irc.InspectorPID() != 0 {
		t.Errorf("PID() = %d, InspectorPID() = %d after Stop, want 0", irc.PID(), irc.InspectorPID())
	}
	irc.Stop() // twice is harmless
}

// Start ends an Ironic that an earlier anvil started in the same state directory and
// left running (anvil was killed), as the pid file names it.
func TestStartEndsLeftoverIronic(t *testing.T) {
	dir := t.TempDir()
	first := startTest(t, func(c *Config) { c.StateDir = dir })
	first.Stop()
	leftover := exec.Command("ironic", "--config-file", first.p.conf)
	leftover.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = leftover.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-leftover.Process.Pid, syscall.SIGKILL); <-exited })
	if err := os.WriteFile(first.p.pid, []byte(strconv.Itoa(leftover.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	second := startTest(t, func(c *Config) { c.StateDir = dir })
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Errorf("the leftover Ironic %d still runs", leftover.Process.Pid)
	}
	if !second.Healthy(context.Background()) {
		t.Error("the second Ironic does not answer")
	}
}

func TestMissingBinaryNamesInstallScript(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Config{StateDir: t.TempDir(), Username: "a", Password: "b"})
	if err == nil || !strings.Contains(err.Error(), "hack/install-deps.sh") {
		t.Errorf("Start without ironic installed: %v, want an error naming hack/install-deps.sh", err)
	}
}

// Ironic installed without ironic-inspector: Start names the missing program and the
// script, and starts nothing.
func TestMissingInspectorNamesInstallScript(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"ironic", "ironic-dbsync"} {
		path, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is not installed: %s", name, InstallHint)
		}
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	dir := t.TempDir()
	_, err := Start(context.Background(), Config{StateDir: dir, Username: "a", Password: "b"})
	if err == nil || !strings.Contains(err.Error(), "ironic-inspector is not installed") || !strings.Contains(err.Error(), "hack/install-deps.sh") {
		t.Errorf("Start without ironic-inspector installed: %v, want an error naming ironic-inspector and hack/install-deps.sh", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ironic.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Ironic was started although ironic-inspector is missing (ironic.pid: %v)", err)
	}
}

func TestRenderConfig(t *testing.T) {
	c := Config{Host: "127.0.0.1", Port: 1234, BootFilesPort: 1235, InspectorPort: 1236, MaxConcurrentDeploy: 10,
		FakeDelays: FakeDelays{Deploy: Delay{Min: 2, Max: 5}, Power: Delay{Min: 1}}}
	got := renderConfig(c, pathsIn("/s"), secrets{toInspector: "to-inspector", toIronic: "to-ironic"})
	for _, want := range []string{
		"rpc_transport = none", "auth_strategy = http_basic", "http_basic_auth_user_file = /s/htpasswd",
		"connection = sqlite:////s/ironic.db", "dhcp_provider = none", "automated_clean = false",
		"max_concurrent_deploy = 10", "host_ip = 127.0.0.1", "port = 1234",
		"deploy_delay = 2,5", "power_delay = 1", "enabled_network_interfaces = noop",
		"enabled_deploy_interfaces = fake,direct,ramdisk", "http_root = /s/httpboot", "http_url = http://127.0.0.1:1235",
		"isolinux_bin = /usr/lib/ISOLINUX/isolinux.bin", "use_swift = false",
		"enabled_inspect_interfaces = fake,redfish,inspector,no-inspect",
		"[inspector]", "auth_type = http_basic", "username = ironic", "password = to-inspector",
		"endpoint_override = http://127.0.0.1:1236",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("ironic.conf lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "max_concurrent_clean") {
		t.Error("max_concurrent_clean written although 0 (Ironic's default wanted)")
	}
	if strings.Contains(got, "to-ironic") {
		t.Error("ironic.conf holds ironic-inspector's password for Ironic")
	}
	for _, want := range []string{"sync_power_state_interval = 10", "force_power_state_during_sync = false"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("ironic.conf lacks %q (a server that powers itself off must be seen off):\n%s", want, got)
		}
	}
	if strings.Contains(got, "erase_devices") {
		t.Error("ironic.conf has clean step priorities although cleaning is off")
	}
}

func TestRenderCleaning(t *testing.T) {
	for c, want := range map[Cleaning][]string{
		CleanMetadata: {"automated_clean = true", "erase_devices_priority = 0", "erase_devices_metadata_priority = 10"},
		CleanFull:     {"automated_clean = true", "erase_devices_priority = 10", "erase_devices_metadata_priority = 20"},
	} {
		got := renderConfig(Config{Host: "127.0.0.1", Cleaning: c}, pathsIn("/s"), secrets{})
		for _, w := range want {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("cleaning %d: ironic.conf lacks %q", c, w)
			}
		}
	}
}
