package bmcemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/testos"
)

// The BMC keeps what Ironic set across the emulator's restarts, as a BMC keeps it in its
// flash: inserted media (URL and file), a Once boot override not yet spent; an eject too.
// A state file damaged from outside stops Start with its path, not a server silently empty.
func TestMediaAndBootOverrideKeptAcrossRestarts(t *testing.T) {
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("an image")) }))
	defer media.Close()
	b := start(t)
	cd, usb := root+"/Managers/server-1/VirtualMedia/Cd", root+"/Managers/server-1/VirtualMedia/UsbStick"
	for file, slot := range map[string]string{"boot.iso": cd, "config.iso": usb} {
		if code, _ := b.do("POST", slot+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/" + file}); code != http.StatusNoContent {
			t.Fatalf("InsertMedia %s: %d", file, code)
		}
	}
	if code, _ := b.do("PATCH", root+"/Systems/server-1", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}); code != http.StatusNoContent {
		t.Fatalf("PATCH Boot: %d", code)
	}
	cfg := b.e.Config()
	if err := b.e.Close(); err != nil {
		t.Fatal(err)
	}

	b = startWith(t, cfg)
	if _, m := b.do("GET", cd, nil); m["Inserted"] != true || m["Image"] != media.URL+"/boot.iso" {
		t.Errorf("the Cd after a restart: %v", m)
	}
	if _, m := b.do("GET", usb, nil); m["Inserted"] != true || m["Image"] != media.URL+"/config.iso" {
		t.Errorf("the UsbStick after a restart: %v", m)
	}
	_, sys := b.do("GET", root+"/Systems/server-1", nil)
	if boot, _ := sys["Boot"].(map[string]any); boot["BootSourceOverrideTarget"] != "Cd" || boot["BootSourceOverrideEnabled"] != "Once" {
		t.Errorf("the boot override after a restart: %v", sys["Boot"])
	}
	if code, _ := b.do("POST", usb+"/Actions/VirtualMedia.EjectMedia", map[string]any{}); code != http.StatusNoContent {
		t.Fatalf("EjectMedia: %d", code)
	}
	if err := b.e.Close(); err != nil {
		t.Fatal(err)
	}

	b = startWith(t, cfg)
	if _, m := b.do("GET", usb, nil); m["Inserted"] != false {
		t.Errorf("the UsbStick ejected before a restart: %v", m)
	}
	if err := b.e.Close(); err != nil {
		t.Fatal(err)
	}

	state := filepath.Join(cfg.StateDir, spec.Name, stateFile)
	if err := os.WriteFile(state, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = logr.Discard()
	if e, err := Start(cfg); err == nil || !strings.Contains(err.Error(), state) {
		if e != nil {
			_ = e.Close()
		}
		t.Errorf("Start with a damaged state file: %v, want an error naming %s", err, state)
	}
}

// Servers keep running when the emulator is closed (anvil dev's Ctrl-C): the same QEMUs
// run on, and an emulator started again on the same state directory adopts them (On, one
// QEMU each); Redfish power actions work on the adopted QEMUs, and a server powered on
// again boots the media Ironic left inserted: an amd64 BIOS server and an arm64 UEFI one.
func TestServersKeepRunningAcrossTheEmulatorsRestart(t *testing.T) {
	stateDir := shortDir(t)
	servers := deployedServers(t)
	b := startWith(t, Config{StateDir: stateDir, Username: user, Password: pass, Servers: specsOf(servers)})
	for _, s := range servers {
		s.deploy(t, b)
	}
	pids := bootedOnce(t, b, stateDir, servers)
	cfg := b.e.Config()
	if err := b.e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if got := ServerProcesses(stateDir, s.spec.Name); !slices.Equal(got, []int{pids[s.spec.Name]}) {
			t.Fatalf("%s: QEMU %v after the emulator's Close, want %d still running", s.spec.Name, got, pids[s.spec.Name])
		}
	}
	checkAdopted(t, startWith(t, cfg), stateDir, servers, pids, true)
}

// The same when the process hosting the emulator is killed (SIGKILL): its servers run on,
// and the emulator started again adopts them.
func TestServersKeepRunningWhenTheEmulatorIsKilled(t *testing.T) {
	stateDir := shortDir(t)
	servers := deployedServers(t)
	port, err := vm.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: stateDir, Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Username: user, Password: pass,
		Servers: specsOf(servers)}
	child := startChild(t, cfg)
	b := &bmc{t: t, base: "http://" + cfg.Listen}
	for _, s := range servers {
		s.deploy(t, b)
	}
	pids := bootedOnce(t, b, stateDir, servers)
	child.kill(t)
	for _, s := range servers {
		if got := ServerProcesses(stateDir, s.spec.Name); !slices.Equal(got, []int{pids[s.spec.Name]}) {
			t.Fatalf("%s: QEMU %v after the emulator's process was killed, want %d still running", s.spec.Name, got, pids[s.spec.Name])
		}
	}
	checkAdopted(t, startWith(t, cfg), stateDir, servers, pids, false)
}

// checkAdopted checks an emulator started again while the servers run: each is On with the
// QEMU it had (pids), and no second QEMU starts. Then, through Redfish, on the adopted
// QEMUs: ForceRestart (restartFirst) or ForceOff and On, after which each boots its
// inserted media again (a second ready line); then the other actions, one QEMU at most.
func checkAdopted(t *testing.T, b *bmc, stateDir string, servers []deployed, pids map[string]int, restartFirst bool) {
	t.Helper()
	for _, s := range servers {
		if got := b.powerOf(s.spec.Name); got != "On" {
			t.Errorf("%s: the emulator started again reports %s, want On", s.spec.Name, got)
		}
		// Reset On of a server already on is a no-op, not a second QEMU.
		s.reset(t, b, "On")
		if got := ServerProcesses(stateDir, s.spec.Name); !slices.Equal(got, []int{pids[s.spec.Name]}) {
			t.Fatalf("%s: QEMU %v after the restart and a Reset On, want the adopted %d alone", s.spec.Name, got, pids[s.spec.Name])
		}
	}
	off := func(s deployed) {
		s.reset(t, b, "ForceOff")
		if got, left := b.powerOf(s.spec.Name), ServerProcesses(stateDir, s.spec.Name); got != "Off" || len(left) != 0 {
			t.Fatalf("%s after ForceOff: %s, QEMU %v; want Off and none", s.spec.Name, got, left)
		}
	}
	on := func(s deployed, action string) {
		s.reset(t, b, action)
		got := ServerProcesses(stateDir, s.spec.Name)
		if b.powerOf(s.spec.Name) != "On" || len(got) != 1 || got[0] == pids[s.spec.Name] {
			t.Fatalf("%s after %s: %s, QEMU %v (the adopted one was %d); want On and one new QEMU",
				s.spec.Name, action, b.powerOf(s.spec.Name), got, pids[s.spec.Name])
		}
		pids[s.spec.Name] = got[0]
	}
	for _, s := range servers {
		if restartFirst {
			on(s, "ForceRestart")
		} else {
			off(s)
			on(s, "On")
		}
	}
	for _, s := range servers {
		waitConsole(t, s.console(stateDir), s.ready, 2)
	}
	for _, s := range servers {
		if restartFirst {
			off(s)
			on(s, "On")
		} else {
			on(s, "ForceRestart")
		}
	}
}

// deployed is a server with the media a ramdisk deploy inserts, and the line its boot prints.
type deployed struct {
	spec    Spec
	cd, usb string // media URLs
	ready   string
}

func (s deployed) console(stateDir string) string {
	return filepath.Join(stateDir, s.spec.Name, "console.log")
}

// deployedServers are an amd64 BIOS server and an arm64 UEFI one, with their boot ISOs
// (built as Ironic builds them) and config drives served over HTTP until the test ends.
func deployedServers(t *testing.T) []deployed {
	t.Helper()
	dir := t.TempDir()
	bootISO(t, filepath.Join(dir, "amd64.iso"))
	uefiBootISO(t, filepath.Join(dir, "arm64.iso"), computev1alpha1.ArchitectureARM64, "console=ttyAMA0")
	media := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(media.Close)
	var servers []deployed
	for _, s := range []Spec{spec, armSpec} {
		configDrive(t, filepath.Join(dir, s.Name+"-config.iso"), s.Name, "kept-"+s.Name)
		servers = append(servers, deployed{spec: s, cd: media.URL + "/" + string(s.arch()) + ".iso",
			usb: media.URL + "/" + s.Name + "-config.iso", ready: testos.ReadyLine(s.arch(), s.Name, "kept-"+s.Name)})
	}
	return servers
}

func specsOf(servers []deployed) []Spec {
	specs := make([]Spec, len(servers))
	for i, s := range servers {
		specs[i] = s.spec
	}
	return specs
}

// deploy does what Ironic's ramdisk deploy does: the config drive in the USB stick, the
// boot ISO in the CD, the override on Cd (Continuous), Reset On.
func (s deployed) deploy(t *testing.T, b *bmc) {
	t.Helper()
	mgr := root + "/Managers/" + s.spec.Name + "/VirtualMedia/"
	for slot, url := range map[string]string{slotUSB: s.usb, slotCd: s.cd} {
		if code, body := b.do("POST", mgr+slot+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": url}); code != http.StatusNoContent {
			t.Fatalf("%s: InsertMedia %s: %d %v", s.spec.Name, slot, code, body)
		}
	}
	if code, body := b.do("PATCH", root+"/Systems/"+s.spec.Name, map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": s.spec.BootMode()}}); code != http.StatusNoContent {
		t.Fatalf("%s: PATCH Boot: %d %v", s.spec.Name, code, body)
	}
	s.reset(t, b, "On")
}

func (s deployed) reset(t *testing.T, b *bmc, resetType string) {
	t.Helper()
	if code, body := b.do("POST", root+"/Systems/"+s.spec.Name+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": resetType}); code != http.StatusNoContent {
		t.Fatalf("%s: Reset %s: %d %v", s.spec.Name, resetType, code, body)
	}
}

// bootedOnce waits for each server's ready line and returns its one QEMU's pid.
func bootedOnce(t *testing.T, b *bmc, stateDir string, servers []deployed) map[string]int {
	t.Helper()
	pids := map[string]int{}
	for _, s := range servers {
		waitConsole(t, s.console(stateDir), s.ready, 1)
		got := ServerProcesses(stateDir, s.spec.Name)
		if len(got) != 1 || b.powerOf(s.spec.Name) != "On" {
			t.Fatalf("%s booted: QEMU %v, power %s; want one, On", s.spec.Name, got, b.powerOf(s.spec.Name))
		}
		pids[s.spec.Name] = got[0]
	}
	return pids
}

// shortDir is a state directory short enough for QMP socket paths (Linux's 107 bytes),
// whose servers are ended, and checked gone, when the test ends.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bmc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		powerOffAll(t, dir)
		_ = os.RemoveAll(dir)
	})
	return dir
}

// childConfig names the variable through which the test binary, run again, hosts an
// emulator (TestMain).
const childConfig = "BMCEMU_TEST_EMULATOR_CONFIG"

// TestMain runs the package's tests; run again by startChild with childConfig set, the
// test binary is instead a process hosting an emulator, which that test kills. It serves
// until its stdin closes (the test ended, however), so it never outlives the test.
func TestMain(m *testing.M) {
	if raw := os.Getenv(childConfig); raw != "" {
		os.Exit(hostEmulator(raw))
	}
	os.Exit(m.Run())
}

// hostEmulator serves an emulator configured by raw until stdin closes.
func hostEmulator(raw string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "emulator process:", err)
		return 1
	}
	cfg.Logger = logr.Discard()
	e, err := Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulator process:", err)
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = e.Close()
	return 0
}

// child is the test binary run again as a process hosting an emulator (TestMain).
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	mu     sync.Mutex
	output bytes.Buffer
}

func (c *child) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.Write(p)
}

// startChild runs an emulator configured by cfg in a process of its own and waits until
// its BMC answers.
func startChild(t *testing.T, cfg Config) *child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: exec.Command(os.Args[0]), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childConfig+"="+string(raw))
	c.cmd.Stdout, c.cmd.Stderr = c, c
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		<-c.exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + cfg.Listen + root)
		if err == nil {
			resp.Body.Close()
			return c
		}
		select {
		case <-c.exited:
			t.Fatalf("the emulator's process exited: %s", c.out())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator's process did not serve in 30 s: %v\n%s", err, c.out())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill ends the emulator's process with SIGKILL and waits until it is gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the emulator's process %d still runs 10 s after SIGKILL", c.cmd.Process.Pid)
	}
}

func (c *child) out() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.String()
}
