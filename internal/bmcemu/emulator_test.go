package bmcemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/qmp"
	"github.com/anvil-dev/anvil/test/testos"
)

const user, pass = "admin", "s3cret-bmc"

var spec = Spec{Name: "server-1", CPUs: 2, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:12:34:56"}

// bmc is a test's view of the emulator: requests with or without credentials.
type bmc struct {
	t    *testing.T
	e    *Emulator
	base string
}

// armSpec is an arm64 server: UEFI only.
var armSpec = Spec{Name: "server-arm", CPUs: 1, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:12:34:57",
	Architecture: computev1alpha1.ArchitectureARM64}

// start runs a BMC for the servers given (spec when none) until the test ends, then ends
// their QEMUs.
func start(t *testing.T, servers ...Spec) *bmc {
	t.Helper()
	if len(servers) == 0 {
		servers = []Spec{spec}
	}
	dir := t.TempDir()
	t.Cleanup(func() { powerOffAll(t, dir) })
	return startWith(t, Config{StateDir: dir, Username: user, Password: pass, Servers: servers})
}

// startWith runs a BMC configured by cfg until the test ends. Its servers outlive it: the
// caller ends them (powerOffAll).
func startWith(t *testing.T, cfg Config) *bmc {
	t.Helper()
	cfg.Logger = testr.New(t)
	e, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &bmc{t: t, e: e, base: "http://" + e.addr}
}

// powerOffAll ends the QEMUs of the servers in stateDir and fails the test if one remains.
func powerOffAll(t *testing.T, stateDir string) {
	t.Helper()
	if err := PowerOffAll(stateDir); err != nil {
		t.Errorf("PowerOffAll: %v", err)
	}
	entries, _ := os.ReadDir(stateDir)
	for _, entry := range entries {
		if pids := ServerProcesses(stateDir, entry.Name()); len(pids) > 0 {
			t.Errorf("server %s: QEMU %v still runs after PowerOffAll", entry.Name(), pids)
		}
	}
}

// do sends a request with the right credentials (unless auth says otherwise) and returns
// the status and decoded body.
func (b *bmc) do(method, path string, body any, auth ...string) (int, map[string]any) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	u, p := user, pass
	if len(auth) == 2 {
		u, p = auth[0], auth[1]
	}
	req.SetBasicAuth(u, p)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (b *bmc) power() string {
	b.t.Helper()
	return b.powerOf("server-1")
}

// powerOf is server name's PowerState.
func (b *bmc) powerOf(name string) string {
	b.t.Helper()
	_, sys := b.do("GET", root+"/Systems/"+name, nil)
	power, _ := sys["PowerState"].(string)
	return power
}

func TestCredentialsAndInventory(t *testing.T) {
	b := start(t)
	if code, _ := b.do("GET", root, nil, "", ""); code != http.StatusOK {
		t.Errorf("service root without credentials: %d, want 200", code)
	}
	if code, _ := b.do("GET", root+"/Systems/server-1", nil, user, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d, want 401", code)
	}
	if code, _ := b.do("GET", root+"/Systems/server-2", nil); code != http.StatusNotFound {
		t.Errorf("an unknown system: %d, want 404", code)
	}
	code, sys := b.do("GET", root+"/Systems/server-1", nil)
	if code != http.StatusOK || sys["PowerState"] != "Off" {
		t.Fatalf("system: %d %v", code, sys)
	}
	if got := sys["MemorySummary"].(map[string]any)["TotalSystemMemoryGiB"]; got != 1.0 {
		t.Errorf("memory %v GiB, want 1", got)
	}
	_, cpu := b.do("GET", root+"/Systems/server-1/Processors/1", nil)
	_, nic := b.do("GET", root+"/Systems/server-1/EthernetInterfaces/1", nil)
	_, disk := b.do("GET", root+"/Systems/server-1/SimpleStorage/1", nil)
	if cpu["TotalThreads"] != 2.0 || nic["MACAddress"] != spec.MAC ||
		disk["Devices"].([]any)[0].(map[string]any)["CapacityBytes"] != float64(8<<30) {
		t.Errorf("inventory: cpu %v, nic %v, disk %v", cpu, nic, disk)
	}
	for _, bad := range []map[string]any{
		{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}},
		{"Boot": map[string]any{"BootSourceOverrideEnabled": "Always"}},
		{"Boot": map[string]any{"BootSourceOverrideMode": "UEFI"}},
	} {
		if code, _ := b.do("PATCH", root+"/Systems/server-1", bad); code != http.StatusBadRequest {
			t.Errorf("PATCH %v: %d, want 400", bad, code)
		}
	}
	if code, _ := b.do("POST", root+"/Systems/server-1/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "Nmi"}); code != http.StatusBadRequest {
		t.Errorf("an unsupported reset: %d, want 400", code)
	}
}

// The test OS booted as Ironic's ramdisk deploy boots it: a BIOS ISO of its kernel and
// initramfs in the virtual CD-ROM, a config drive in the virtual USB stick, the boot
// override on Cd, Reset On. The guest prints the config drive's hostname and marker.
func TestBootsTheInsertedCDWithItsConfigDrive(t *testing.T) {
	b := start(t)
	dir := t.TempDir()
	bootISO(t, filepath.Join(dir, "boot.iso"))
	configDrive(t, filepath.Join(dir, "config.iso"), "server-one", "from-the-stick")
	media := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer media.Close()
	cd := root + "/Managers/server-1/VirtualMedia/Cd"
	usb := root + "/Managers/server-1/VirtualMedia/UsbStick"
	if code, _ := b.do("POST", usb+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/config.iso"}); code != http.StatusNoContent {
		t.Fatalf("InsertMedia UsbStick: %d", code)
	}

	if code, _ := b.do("POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/boot.iso"}); code != http.StatusNoContent {
		t.Fatalf("InsertMedia: %d", code)
	}
	if _, vm := b.do("GET", cd, nil); vm["Inserted"] != true || vm["Image"] != media.URL+"/boot.iso" {
		t.Errorf("the Cd after InsertMedia: %v", vm)
	}
	if code, _ := b.do("POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/boot.iso"}); code != http.StatusConflict {
		t.Errorf("a second InsertMedia: %d, want 409", code)
	}
	if code, _ := b.do("PATCH", root+"/Systems/server-1", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": "Legacy"}}); code != http.StatusNoContent {
		t.Fatalf("PATCH Boot: %d", code)
	}
	if code, _ := b.do("POST", root+"/Systems/server-1/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}); code != http.StatusNoContent {
		t.Fatalf("Reset On: %d", code)
	}
	if b.power() != "On" {
		t.Fatal("not On after Reset On")
	}
	waitConsole(t, b.e.ConsolePath("server-1"), testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "server-one", "from-the-stick"), 1)
	checkSerialConsole(t, b, "server-1")

	// Ejected while it runs: QEMU's drive is empty.
	if code, _ := b.do("POST", cd+"/Actions/VirtualMedia.EjectMedia", map[string]any{}); code != http.StatusNoContent {
		t.Fatalf("EjectMedia: %d", code)
	}
	if inserted := cdInserted(t, b.e.machines["server-1"].qmpSocket()); inserted {
		t.Error("QEMU's CD-ROM still holds the medium after EjectMedia")
	}
	// Inserted again while it runs: QEMU, no longer root, gets the file as a descriptor.
	if code, _ := b.do("POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/boot.iso"}); code != http.StatusNoContent {
		t.Fatalf("InsertMedia while on: %d", code)
	}
	if inserted := cdInserted(t, b.e.machines["server-1"].qmpSocket()); !inserted {
		t.Error("QEMU's CD-ROM is empty after InsertMedia while on")
	}
	// A server's QEMU started by a root emulator is not root (a guest escaping into it).
	if os.Geteuid() == 0 {
		m := b.e.machines["server-1"]
		m.mu.Lock()
		pid := m.proc.PID
		m.mu.Unlock()
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && (f[0] == "Uid:" || f[0] == "Gid:") && slices.Contains(f[1:], "0") {
				t.Errorf("the server's QEMU runs as root: %s", line)
			}
		}
	}
	if code, _ := b.do("POST", root+"/Systems/server-1/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}); code != http.StatusNoContent || b.power() != "Off" {
		t.Fatalf("ForceOff: %d, power %s", code, b.power())
	}
}

// UEFI servers (arm64 always; amd64 when asked) say so, refuse a Legacy override, report
// their processor, and boot a UEFI ISO built the way Ironic builds one (the ESP of make
// esp, grub.cfg at boot/grub/grub.cfg) with the config drive on the USB stick.
func TestUEFIServersBootAUEFIISO(t *testing.T) {
	amdUEFI := spec
	amdUEFI.Name, amdUEFI.MAC, amdUEFI.UEFI = "server-uefi", "52:54:00:12:34:58", true
	for _, tc := range []struct {
		s         Spec
		arch, isa string
		console   string
	}{
		{armSpec, "ARM", "ARM-A64", "console=ttyAMA0"},
		{amdUEFI, "x86", "x86-64", "console=ttyS0"},
	} {
		t.Run(string(tc.s.arch()), func(t *testing.T) {
			b := start(t, tc.s)
			name := tc.s.Name
			sys := root + "/Systems/" + name
			if _, s := b.do("GET", sys, nil); s["Boot"].(map[string]any)["BootSourceOverrideMode"] != "UEFI" {
				t.Errorf("BootSourceOverrideMode = %v, want UEFI", s["Boot"])
			}
			if _, p := b.do("GET", sys+"/Processors/1", nil); p["ProcessorArchitecture"] != tc.arch || p["InstructionSet"] != tc.isa {
				t.Errorf("processor: %v", p)
			}
			if code, _ := b.do("PATCH", sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}}); code != http.StatusBadRequest {
				t.Errorf("PATCH a Legacy override: %d, want 400", code)
			}

			dir := t.TempDir()
			uefiBootISO(t, filepath.Join(dir, "boot.iso"), tc.s.arch(), tc.console)
			configDrive(t, filepath.Join(dir, "config.iso"), name, "uefi-stick")
			media := httptest.NewServer(http.FileServer(http.Dir(dir)))
			defer media.Close()
			mgr := root + "/Managers/" + name + "/VirtualMedia/"
			for slot, file := range map[string]string{"UsbStick": "config.iso", "Cd": "boot.iso"} {
				if code, _ := b.do("POST", mgr+slot+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": media.URL + "/" + file}); code != http.StatusNoContent {
					t.Fatalf("InsertMedia %s: %d", slot, code)
				}
			}
			if code, _ := b.do("PATCH", sys, map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}}); code != http.StatusNoContent {
				t.Fatalf("PATCH Boot: %d", code)
			}
			if code, _ := b.do("POST", sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}); code != http.StatusNoContent {
				t.Fatalf("Reset On: %d", code)
			}
			waitConsole(t, b.e.ConsolePath(name), testos.ReadyLine(tc.s.arch(), name, "uefi-stick"), 1)
			if inserted := cdInserted(t, b.e.machines[name].qmpSocket()); !inserted {
				t.Error("QEMU's CD-ROM is empty while the Cd slot holds the ISO")
			}
			if code, _ := b.do("POST", mgr+"Cd/Actions/VirtualMedia.EjectMedia", map[string]any{}); code != http.StatusNoContent {
				t.Fatalf("EjectMedia: %d", code)
			}
			if inserted := cdInserted(t, b.e.machines[name].qmpSocket()); inserted {
				t.Error("QEMU's CD-ROM still holds the medium after EjectMedia")
			}
		})
	}
}

// uefiBootISO builds at path what Ironic's create_esp_image_for_uefi builds with
// [DEFAULT] esp_image set (internal/ironic): the ESP as boot/grub/efiboot.img, the El
// Torito image, and a grub.cfg at boot/grub/grub.cfg booting arch's test OS.
func uefiBootISO(t *testing.T, path string, arch computev1alpha1.Architecture, console string) {
	t.Helper()
	osDir := testos.Dir(t)
	tree := t.TempDir()
	mustRun(t, "mkdir", "-p", filepath.Join(tree, "boot", "grub"))
	for from, to := range map[string]string{
		testos.ESPImage(t):                              "boot/grub/efiboot.img",
		filepath.Join(osDir, string(arch), "kernel"):    "vmlinuz",
		filepath.Join(osDir, string(arch), "initramfs"): "initrd",
	} {
		mustRun(t, "cp", from, filepath.Join(tree, to))
	}
	cfg := "set timeout=0\nmenuentry boot {\nlinux /vmlinuz " + console + "\ninitrd /initrd\n}\n"
	if err := writeFile(filepath.Join(tree, "boot", "grub", "grub.cfg"), cfg); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "genisoimage", "-quiet", "-r", "-V", "VMEDIA_BOOT_ISO", "-l", "-e", "boot/grub/efiboot.img",
		"-no-emul-boot", "-o", path, tree)
}

// bootISO builds at path what Ironic's prepare_boot_iso builds for a BIOS ramdisk deploy:
// isolinux booting the test OS's kernel and initramfs.
func bootISO(t *testing.T, path string) {
	t.Helper()
	osDir := testos.Dir(t)
	tree := t.TempDir()
	mustRun(t, "mkdir", "-p", filepath.Join(tree, "isolinux"))
	for from, to := range map[string]string{
		"/usr/lib/ISOLINUX/isolinux.bin":             "isolinux/isolinux.bin",
		"/usr/lib/syslinux/modules/bios/ldlinux.c32": "isolinux/ldlinux.c32",
		filepath.Join(osDir, "amd64", "kernel"):      "vmlinuz",
		filepath.Join(osDir, "amd64", "initramfs"):   "initrd",
	} {
		mustRun(t, "cp", from, filepath.Join(tree, to))
	}
	cfg := "default boot\nprompt 0\nlabel boot\n  kernel /vmlinuz\n  append initrd=/initrd console=ttyS0\n"
	if err := writeFile(filepath.Join(tree, "isolinux", "isolinux.cfg"), cfg); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "genisoimage", "-quiet", "-o", path, "-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat",
		"-no-emul-boot", "-boot-load-size", "4", "-boot-info-table", "-J", "-R", tree)
}

// configDrive builds at path an OpenStack config drive as Ironic makes one: ISO9660
// labelled config-2 with openstack/latest/{meta_data.json,user_data}.
func configDrive(t *testing.T, path, hostname, marker string) {
	t.Helper()
	tree := t.TempDir()
	latest := filepath.Join(tree, "openstack", "latest")
	mustRun(t, "mkdir", "-p", latest)
	if err := writeFile(filepath.Join(latest, "meta_data.json"), `{"uuid": "x", "hostname": "`+hostname+`"}`); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(latest, "user_data"), "#cloud-config\n# anvil-marker="+marker+"\n"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "genisoimage", "-quiet", "-o", path, "-V", "config-2", "-J", "-R", tree)
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s (make deps installs what is missing)", name, strings.Join(args, " "), err, out)
	}
}

// cdInserted asks the running QEMU whether its CD-ROM holds a medium.
func cdInserted(t *testing.T, socket string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := qmp.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var blocks []struct {
		Qdev     string `json:"qdev"`
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	if err := c.Execute(ctx, "query-block", nil, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Qdev == "cd" || strings.HasSuffix(b.Qdev, "/cd") {
			return b.Inserted != nil
		}
	}
	t.Fatalf("QEMU has no CD-ROM: %+v", blocks)
	return false
}

// waitConsole waits until the console file shows want n times.
func waitConsole(t *testing.T, path, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		raw, _ := os.ReadFile(path)
		if strings.Count(string(raw), want) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console %s never showed %q %d times:\n%s", path, want, n, raw[max(0, len(raw)-3000):])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkSerialConsole opens server name's serial console where its Redfish System says
// (SerialConsole.Telnet), types a line and reads the guest's terminal echo back; a second
// session while the first is on is closed at once; what the guest echoed is in the
// server's console log too.
func checkSerialConsole(t *testing.T, b *bmc, name string) {
	t.Helper()
	_, sys := b.do("GET", root+"/Systems/"+name, nil)
	telnet, _ := sys["SerialConsole"].(map[string]any)["Telnet"].(map[string]any)
	port, _ := telnet["Port"].(float64)
	if telnet["ServiceEnabled"] != true || port == 0 {
		t.Fatalf("System %s's SerialConsole: %v", name, sys["SerialConsole"])
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	typed := fmt.Sprintf("typed-at-the-bmc-%d", time.Now().UnixNano())
	// The session is on once the emulator has joined it to QEMU's socket: type until the
	// echo comes (what is typed before that is dropped with the connection's first bytes).
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for deadline := time.Now().Add(30 * time.Second); !bytes.Contains(seen.Bytes(), []byte(typed)); {
		if time.Now().After(deadline) {
			t.Fatalf("no echo of %q from %s's serial console within 30 s; it sent %q", typed, name, seen.String())
		}
		if _, err := io.WriteString(c, typed+"\r"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		seen.Write(buf[:n])
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s's serial console: %v after %q", name, err, seen.String())
		}
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := second.Read(buf); err != io.EOF {
		t.Errorf("a second session while one is on: read %d bytes, %v; want it closed at once", n, err)
	}
	waitConsole(t, b.e.ConsolePath(name), typed, 1)
}
