package ironic

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/testos"
)

func TestDriverFor(t *testing.T) {
	creds := provisioner.Registration{Username: "root", Password: "pw"}
	for _, tc := range []struct {
		addr     string
		insecure bool
		driver   string
		info     map[string]any
		inspect  string
	}{
		{"fake://h1", false, "fake-hardware", map[string]any{}, "fake"},
		{"redfish://10.0.0.1/redfish/v1/Systems/1", true, "redfish", map[string]any{
			"redfish_address": "https://10.0.0.1", "redfish_system_id": "/redfish/v1/Systems/1",
			"redfish_username": "root", "redfish_password": "pw", "redfish_verify_ca": false, "config_via_removable": true}, "redfish"},
		{"redfish+http://127.0.0.1:8000/redfish/v1/Systems/abc/", false, "redfish", map[string]any{
			"redfish_address": "http://127.0.0.1:8000", "redfish_system_id": "/redfish/v1/Systems/abc",
			"redfish_username": "root", "redfish_password": "pw", "config_via_removable": true}, "redfish"},
		{"redfish://bmc.example", false, "redfish", map[string]any{
			"redfish_address": "https://bmc.example", "redfish_username": "root", "redfish_password": "pw", "config_via_removable": true}, "redfish"},
		{"ipmi://10.0.0.2", false, "ipmi", map[string]any{
			"ipmi_address": "10.0.0.2", "ipmi_port": "623", "ipmi_username": "root", "ipmi_password": "pw"}, "inspector"},
		{"ipmi://10.0.0.2:6230", false, "ipmi", map[string]any{
			"ipmi_address": "10.0.0.2", "ipmi_port": "6230", "ipmi_username": "root", "ipmi_password": "pw"}, "inspector"},
	} {
		r := creds
		r.BMCAddress, r.DisableCertificateVerification = tc.addr, tc.insecure
		d, err := driverFor(r)
		if err != nil || d.Driver != tc.driver || !reflect.DeepEqual(d.DriverInfo, tc.info) {
			t.Errorf("driverFor(%s) = %+v, %v; want %s %v", tc.addr, d, err, tc.driver, tc.info)
		}
		if got := d.Interfaces["inspect_interface"]; got != tc.inspect {
			t.Errorf("driverFor(%s) inspects with %q, want %q", tc.addr, got, tc.inspect)
		}
	}
	for _, bad := range []string{"", "10.0.0.1", "idrac://h", "redfish://", "ipmi://:623", "http://h"} {
		if _, err := driverFor(provisioner.Registration{BMCAddress: bad}); !errors.Is(err, provisioner.ErrInvalid) {
			t.Errorf("driverFor(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestRegistrationHash(t *testing.T) {
	r := provisioner.Registration{Name: "n", BMCAddress: "redfish://h/s", Username: "u", Password: "p",
		BootMACAddress: "AA:BB:CC:DD:EE:FF", Architecture: "amd64"}
	d, _ := driverFor(r)
	h := registrationHash("key", d, r)
	r2 := r
	r2.BootMACAddress = "aa:bb:cc:dd:ee:ff"
	if registrationHash("key", d, r2) != h {
		t.Error("the MAC's case changed the hash")
	}
	r2.Password = "p2"
	d2, _ := driverFor(r2)
	if registrationHash("key", d2, r2) == h {
		t.Error("a new BMC password did not change the hash")
	}
	if registrationHash("other", d, r) == h {
		t.Error("the hash does not depend on the key")
	}
}

func TestArch(t *testing.T) {
	for goarch, ironic := range map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le"} {
		if ironicArch(goarch) != ironic || goArch(ironic) != goarch {
			t.Errorf("%s <-> %s does not round-trip", goarch, ironic)
		}
	}
}

// ipmiBMC is an IPMI BMC of a server that does not exist, on pyghmi (which python3-ironic
// depends on, so it is wherever Ironic is): it keeps the power state and boot device
// that ipmitool sets, and prints every change.
const ipmiBMC = `
import os, sys
import pyghmi.ipmi.bmc as bmc

class BMC(bmc.Bmc):
    power, boot = "off", "default"
    def set_power(self, state):
        self.power = state
        print("power", state, flush=True)
    def get_power_state(self): return self.power
    def power_on(self): self.set_power("on")
    def power_off(self): self.set_power("off")
    def power_shutdown(self): self.set_power("off")
    def power_cycle(self): self.set_power("on")
    def power_reset(self): self.set_power("on")
    def get_boot_device(self): return self.boot
    def set_boot_device(self, device):
        self.boot = device
        print("boot", device, flush=True)

BMC({os.environ["BMC_USER"]: os.environ["BMC_PASSWORD"]}, port=int(sys.argv[1]), address="127.0.0.1").listen()
`

// startIPMIBMC runs ipmiBMC on a free loopback UDP port until the test ends, and returns
// its port and what it printed so far.
func startIPMIBMC(t *testing.T, user, password string) (int, func() string) {
	t.Helper()
	// Debian's Python, which Ironic runs on: another python3 earlier in PATH lacks pyghmi.
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s (Ironic's Python, with pyghmi) is missing: %v; %s", python, err, ironic.InstallHint)
	}
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	script := filepath.Join(t.TempDir(), "bmc.py")
	if err := os.WriteFile(script, []byte(ipmiBMC), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testos.SyncBuffer{} // what the BMC prints, read while it runs
	cmd := exec.Command(python, script, strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "BMC_USER="+user, "BMC_PASSWORD="+password)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Answering ipmitool, as Ironic will call it (-E: the password from IPMI_PASSWORD).
	deadline := time.Now().Add(20 * time.Second)
	for {
		check := exec.Command("ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(port),
			"-U", user, "-E", "-R", "1", "-N", "1", "power", "status")
		check.Env = append(os.Environ(), "IPMI_PASSWORD="+password)
		status, err := check.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the IPMI BMC does not answer: %v %s; it printed: %s", err, status, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return port, out.String
}

// An ipmi:// Host is inspected by ironic-inspector. Registered against an IPMI BMC on a
// loopback port, the node becomes manageable over ipmitool; Inspect hands it to
// ironic-inspector, which has Ironic set its boot device to PXE and power it on through
// that BMC, and the node then waits ("inspect wait", Inspecting) for an agent ramdisk
// to boot and post what it found to ironic-inspector. That needs a real server booting
// the ramdisk over PXE, so inspection goes no further here.
func TestIPMIInspectionGoesThroughInspector(t *testing.T) {
	const ipmiPassword = "ipmi-secret-pw-42" // IPMI 2.0 passwords have 20 bytes at most
	port, bmcSaid := startIPMIBMC(t, "admin", ipmiPassword)
	irc := shared.Ironic(t)
	p, logs := newProvisioner(t, irc, nil)
	ctx := context.Background()
	name := "ns~ipmi-1"
	r := provisioner.Registration{Name: name, BMCAddress: "ipmi://127.0.0.1:" + strconv.Itoa(port), Username: "admin",
		Password: ipmiPassword, BootMACAddress: macFor(name), Architecture: "amd64"}
	if _, err := p.Register(ctx, r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	waitFor(t, p, name, 2*time.Minute, "manageable", idleIn(provisioner.StateManageable))
	if err := p.Inspect(ctx, name); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	n := waitFor(t, p, name, time.Minute, "handed to ironic-inspector", func(n provisioner.Node) bool {
		return n.State == provisioner.StateInspecting && strings.Contains(bmcSaid(), "boot network") && strings.Contains(bmcSaid(), "power on")
	})
	if n.LastError != "" {
		t.Errorf("LastError = %q while inspecting", n.LastError)
	}
	// Still waiting a while later: nothing here boots the ramdisk that would report.
	time.Sleep(5 * time.Second)
	if n, err := p.Get(ctx, name); err != nil || n.State != provisioner.StateInspecting {
		t.Errorf("node after 5 s = %+v, %v; want still Inspecting", n, err)
	}
	if t.Failed() {
		t.Logf("the BMC printed:\n%s\nironic-inspector.log ends with:\n%s", bmcSaid(), ironictest.Tail(irc.InspectorLogPath(), 40))
	}
	if strings.Contains(logs.String(), ipmiPassword) {
		t.Error("the provisioner logged the BMC password")
	}
}
