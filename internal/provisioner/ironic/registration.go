package ironic

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// driverSpec is how Ironic is told to reach one server's BMC.
type driverSpec struct {
	Driver     string
	DriverInfo map[string]any
	// Interfaces fixes the interfaces where the hardware type's default would be one
	// this Ironic does not serve (PXE/iPXE have no TFTP or DHCP here).
	Interfaces map[string]string
}

// driverFor parses a Host's BMC address:
//
//	fake://anything                  fake-hardware (tests, the dev site)
//	redfish://host[:port]/system     redfish over https (redfish+http://, redfish+https://)
//	ipmi://host[:port]               ipmi (port 623 by default)
func driverFor(r provisioner.Registration) (driverSpec, error) {
	u, err := url.Parse(r.BMCAddress)
	if err != nil || u.Scheme == "" {
		return driverSpec{}, fmt.Errorf("BMC address %q is not a URL like redfish://host/redfish/v1/Systems/1: %w", r.BMCAddress, provisioner.ErrInvalid)
	}
	switch u.Scheme {
	case "fake":
		return driverSpec{Driver: "fake-hardware", DriverInfo: map[string]any{}, Interfaces: interfaces(
			"fake", "fake", "fake", "fake", "fake", "fake", "fake", "fake", "fake", "fake")}, nil
	case "redfish", "redfish+https", "redfish+http",
		"redfish-virtualmedia", "redfish-virtualmedia+https", "redfish-virtualmedia+http":
		system, ok := metalv1alpha1.RedfishSystemURL(r.BMCAddress)
		if !ok {
			return driverSpec{}, fmt.Errorf("BMC address %q has no host: %w", r.BMCAddress, provisioner.ErrInvalid)
		}
		info := map[string]any{
			"redfish_address":  system.Scheme + "://" + system.Host,
			"redfish_username": r.Username,
			"redfish_password": r.Password,
		}
		if p := strings.TrimRight(system.Path, "/"); p != "" {
			info["redfish_system_id"] = p
		}
		if r.DisableCertificateVerification {
			info["redfish_verify_ca"] = false
		}
		// Every tear-down then ejects the virtual USB stick, where a ramdisk deployment's
		// config drive is, even for a node adopted without its config drive: one
		// tenant's first-boot data never stays in the server the next tenant gets.
		info["config_via_removable"] = true
		// Virtual media is the only boot that needs no PXE/TFTP service beside Ironic, so
		// redfish:// and redfish-virtualmedia:// boot the same way.
		return driverSpec{Driver: "redfish", DriverInfo: info, Interfaces: interfaces(
			"no-bios", "redfish-virtual-media", "no-console", "direct", "redfish", "redfish", "redfish", "no-raid", "no-rescue", "no-vendor")}, nil
	case "ipmi":
		host, port := u.Host, "623"
		if h, p, err := net.SplitHostPort(u.Host); err == nil {
			host, port = h, p
		}
		if host == "" {
			return driverSpec{}, fmt.Errorf("BMC address %q has no host: %w", r.BMCAddress, provisioner.ErrInvalid)
		}
		// IPMI tells nothing about the hardware, so inspection is in-band: ironic-inspector
		// (internal/ironic runs it) has the server PXE-boot an agent ramdisk that reports
		// back, which needs a PXE set-up beside Ironic.
		return driverSpec{Driver: "ipmi", DriverInfo: map[string]any{
			"ipmi_address":  host,
			"ipmi_port":     port,
			"ipmi_username": r.Username,
			"ipmi_password": r.Password,
		}, Interfaces: interfaces("no-bios", "pxe", "no-console", "direct", "inspector", "ipmitool", "ipmitool", "no-raid", "no-rescue", "no-vendor")}, nil
	}
	return driverSpec{}, fmt.Errorf("BMC address scheme %q is not supported (fake, redfish, redfish+http, redfish+https, ipmi): %w", u.Scheme, provisioner.ErrInvalid)
}

// interfaces names every interface of a node explicitly, so a node whose BMC address
// changes to another kind (redfish to fake, say) keeps none of the old kind's interfaces,
// which its new hardware type would refuse.
func interfaces(bios, boot, console, deploy, inspect, management, power, raid, rescue, vendor string) map[string]string {
	return map[string]string{
		"bios_interface": bios, "boot_interface": boot, "console_interface": console, "deploy_interface": deploy,
		"inspect_interface": inspect, "management_interface": management, "power_interface": power,
		"raid_interface": raid, "rescue_interface": rescue, "vendor_interface": vendor,
	}
}

// ironicArch is Ironic's cpu_arch for a GOARCH name.
func ironicArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return goarch
}

// goArch is the GOARCH name for Ironic's cpu_arch.
func goArch(arch string) string {
	switch arch {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	}
	return arch
}

// properties are the node properties anvil owns.
func properties(r provisioner.Registration) map[string]any {
	p := map[string]any{}
	if a := ironicArch(r.Architecture); a != "" {
		p["cpu_arch"] = a
	}
	if len(r.RootDeviceHints) > 0 {
		p["root_device"] = r.RootDeviceHints
	}
	for k, v := range fakeHardware(r.BMCAddress) {
		p[k] = v
	}
	return p
}

// fakeProperties are the node properties a fake:// address may set.
var fakeProperties = []string{"cpus", "memory_mb", "local_gb"}

// fakeHardware reads what a fake-hardware server "has" from its address's query
// (fake://name?cpus=8&memory_mb=16384&local_gb=100). Ironic's fake inspection finds
// nothing, so without this a fake server would have no size and fit no MachineClass.
func fakeHardware(address string) map[string]any {
	u, err := url.Parse(address)
	if err != nil || u.Scheme != "fake" {
		return nil
	}
	out := map[string]any{}
	q := u.Query()
	for _, k := range fakeProperties {
		if n, err := strconv.Atoi(q.Get(k)); err == nil && n > 0 {
			out[k] = n
		}
	}
	return out
}

// registrationHash identifies everything Register applies, so an unchanged registration
// costs one GET. It is an HMAC keyed with Ironic's password: the node's extra is readable
// through the API, and a plain hash of a weak BMC password could be reversed.
func registrationHash(key string, d driverSpec, r provisioner.Registration) string {
	b, _ := json.Marshal(struct {
		Driver     string
		Info       map[string]any
		Interfaces map[string]string
		MAC        string
		Properties map[string]any
	}{d.Driver, d.DriverInfo, d.Interfaces, strings.ToLower(r.BootMACAddress), properties(r)})
	m := hmac.New(sha256.New, []byte(key))
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil)[:16])
}
