package ironic

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Config says how to run Ironic.
type Config struct {
	// StateDir holds ironic.conf, the htpasswd file, the SQLite database and ironic.log,
	// and ironic-inspector's files beside them (inspector.conf, inspector.db...).
	// It must be an absolute path or one that can be made absolute; it is created.
	StateDir string
	// Host is the API's listen address; 127.0.0.1 when empty. Loopback only: the API
	// speaks plain HTTP.
	Host string
	// Port is the API's port; 0 picks a free loopback port once, kept across restarts.
	Port int
	// BootFilesPort is the port of the HTTP server that gives BMCs the boot ISOs and
	// config drives Ironic builds for virtual-media boot ([deploy] http_url); 0 picks a
	// free one.
	BootFilesPort int
	// InspectorPort is ironic-inspector's port; 0 picks a free loopback port once, kept
	// across restarts.
	InspectorPort int
	// Username and Password are the API's credentials (HTTP basic auth). Ironic has one
	// more user, ironic-inspector's, with a password Start generates.
	Username, Password string
	// MaxConcurrentDeploy and MaxConcurrentClean are Ironic's own limits
	// ([conductor] max_concurrent_deploy / max_concurrent_clean); 0 keeps Ironic's
	// defaults (250 and 50).
	MaxConcurrentDeploy, MaxConcurrentClean int
	// ESPImage is the EFI system partition image (hack/esp/build.sh, make esp) Ironic puts
	// into the UEFI boot ISOs it builds for virtual-media deploys ([DEFAULT] esp_image).
	// Without one, only Legacy (BIOS) Hosts can boot a kernel + initramfs image through
	// virtual media: Ironic fails a UEFI one with "Neither deploy ISO nor ESP image
	// configured".
	ESPImage string
	// FakeDelays slow the fake-hardware interfaces down, for realistic load tests.
	FakeDelays FakeDelays
	// Cleaning turns on Ironic's automated cleaning, which erases a server's disks on every
	// tear-down with Ironic's agent ramdisk (IPA, which the Hosts' registrations must then
	// name; anvil ships none). CleanNone leaves it off: the site's own eraser wipes, or
	// nothing does.
	Cleaning Cleaning
	// Log, when set, receives Ironic's output as well as StateDir/ironic.log, and
	// ironic-inspector's as well as StateDir/ironic-inspector.log.
	Log io.Writer
	// Logger receives the supervisor's own messages (starts, restarts) about both programs.
	Logger logr.Logger
	// OnRestart, when set, is called each time a restarted Ironic answers again (perhaps
	// with an empty database); not for ironic-inspector. It must return quickly.
	OnRestart func()
	// StartTimeout bounds how long one start of either program may take to answer; 60 s
	// when zero.
	StartTimeout time.Duration
	// HealthInterval is how often a running Ironic or ironic-inspector is asked whether
	// it answers; 3 s when zero. Three failures in a row restart it.
	HealthInterval time.Duration
}

// Cleaning is how much Ironic's automated cleaning erases. The zero value is off.
type Cleaning int

const (
	// CleanNone: automated cleaning off.
	CleanNone Cleaning = iota
	// CleanMetadata: the agent's erase_devices_metadata step (partition tables, file
	// system signatures), fast.
	CleanMetadata
	// CleanFull: the agent's erase_devices step as well (every block; hours on big disks).
	CleanFull
)

// FakeDelays are the [fake] section's delays of the fake-hardware interfaces.
type FakeDelays struct {
	Power, Boot, Deploy, Management, Inspect Delay
}

// Delay is a sleep in whole seconds (Ironic parses integers): Min alone when Max <= Min,
// otherwise a triangular random sleep between Min and Max weighted towards Min.
type Delay struct {
	Min, Max int
}

func (d Delay) String() string {
	if d.Max <= d.Min {
		return strconv.Itoa(d.Min)
	}
	return fmt.Sprintf("%d,%d", d.Min, d.Max)
}

// Defaults of the fields left zero.
const (
	DefaultHost           = "127.0.0.1"
	DefaultStartTimeout   = 60 * time.Second
	DefaultHealthInterval = 3 * time.Second
	// healthFailures in a row make the supervisor restart a program.
	healthFailures = 3
)

// grubConfigPath is where on a UEFI boot ISO Ironic writes its grub.cfg; the ESP's
// embedded config (hack/esp/embedded.cfg) looks for it there.
const grubConfigPath = "boot/grub/grub.cfg"

// grubTemplate is the grub.cfg of Ironic's UEFI boot ISOs (Jinja, rendered by Ironic).
// Ironic's own uses linuxefi/initrdefi, which only distributions' patched x86 GRUBs have;
// upstream GRUB's linux/initrd boot an EFI kernel on every architecture.
const grubTemplate = `set default=0
set timeout=1
menuentry "anvil" {
linux {{ linux }} {{ kernel_params }}
initrd {{ initrd }}
}
`

// isolinuxBin is the BIOS boot loader of the ISOs Ironic builds (package isolinux).
const isolinuxBin = "/usr/lib/ISOLINUX/isolinux.bin"

// paths are the files Ironic and ironic-inspector are run with, all inside StateDir.
type paths struct {
	dir, conf, htpasswd, db, log, pid, tftp, http, locks, grubTemplate string
	insp                                                               inspectorPaths
}

// inspectorPaths are ironic-inspector's files.
type inspectorPaths struct {
	conf, htpasswd, db, log, pid string
}

func pathsIn(dir string) paths {
	return paths{
		dir:          dir,
		conf:         filepath.Join(dir, "ironic.conf"),
		htpasswd:     filepath.Join(dir, "htpasswd"),
		db:           filepath.Join(dir, "ironic.db"),
		log:          filepath.Join(dir, "ironic.log"),
		pid:          filepath.Join(dir, "ironic.pid"),
		tftp:         filepath.Join(dir, "tftpboot"),
		http:         filepath.Join(dir, "httpboot"),
		locks:        filepath.Join(dir, "locks"),
		grubTemplate: filepath.Join(dir, "grub.cfg.template"),
		insp: inspectorPaths{
			conf:     filepath.Join(dir, "inspector.conf"),
			htpasswd: filepath.Join(dir, "inspector-htpasswd"),
			db:       filepath.Join(dir, "inspector.db"),
			log:      filepath.Join(dir, "ironic-inspector.log"),
			pid:      filepath.Join(dir, "ironic-inspector.pid"),
		},
	}
}

// hardware types and the interfaces they need. Every type enabled must find one enabled
// interface of each kind it supports, or the conductor refuses to start, so the lists go
// together:
//   - fake-hardware: all fake interfaces; what tests and the dev site use.
//   - redfish: sushy is installed (python3-sushy); redfish power/management/inspect and
//     redfish-virtual-media boot load without other services. The ramdisk deploy boots a
//     kernel + initramfs image from an ISO Ironic builds (mkisofs, isolinux) and attaches
//     the config drive as a second medium; a whole-disk image still needs an IPA ramdisk
//     (direct deploy), which anvil does not ship.
//   - ipmi: ipmitool; its only boot interfaces are pxe/ipxe, whose loading writes boot
//     files into [pxe] tftp_root and [deploy] http_root, so those point into StateDir.
//     Nothing serves them (no TFTP/DHCP): enroll, manage and power work; inspection
//     goes through ironic-inspector (inspect interface inspector), which has the server
//     PXE-boot an agent ramdisk, so it finishes only where a PXE set-up, which anvil
//     does not provide, serves one; deploying an ipmi server needs the same.
var interfaces = [][2]string{
	{"enabled_hardware_types", "fake-hardware,redfish,ipmi"},
	{"enabled_bios_interfaces", "fake,no-bios,redfish"},
	{"enabled_boot_interfaces", "fake,redfish-virtual-media,pxe"},
	{"enabled_console_interfaces", "fake,no-console"},
	{"enabled_deploy_interfaces", "fake,direct,ramdisk"},
	{"enabled_inspect_interfaces", "fake,redfish,inspector,no-inspect"},
	{"enabled_management_interfaces", "fake,redfish,ipmitool"},
	{"enabled_network_interfaces", "noop"},
	{"enabled_power_interfaces", "fake,redfish,ipmitool"},
	{"enabled_raid_interfaces", "fake,no-raid"},
	{"enabled_rescue_interfaces", "fake,no-rescue"},
	{"enabled_storage_interfaces", "fake,noop"},
	{"enabled_vendor_interfaces", "fake,no-vendor,ipmitool"},
}

// quietLogLevels is Ironic's own default_log_levels with the API's access log (one line a
// request: with a few dozen nodes polled it drowns everything else) turned down to
// warnings; ironic-inspector, polled by the supervisor and Ironic, gets it too.
var quietLogLevels = strings.Join([]string{
	"amqp=WARNING", "amqplib=WARNING", "qpid.messaging=INFO", "oslo.messaging=INFO",
	"oslo_messaging=INFO", "sqlalchemy=WARNING", "stevedore=INFO", "eventlet.wsgi.server=WARNING",
	"iso8601=WARNING", "requests=WARNING", "glanceclient=WARNING", "urllib3.connectionpool=WARNING",
	"keystonemiddleware.auth_token=INFO", "keystoneauth.session=INFO", "openstack=WARNING",
	"oslo_policy=WARNING", "oslo_concurrency.lockutils=WARNING",
}, ",")

// renderConfig is ironic.conf for c (defaults applied), the files in p and the
// generated credentials sec.
func renderConfig(c Config, p paths, sec secrets) string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s = %v\n", k, v) }
	b.WriteString("# Written by anvil (internal/ironic) on every start; edits are lost.\n[DEFAULT]\n")
	// API and conductor in one process, no message bus.
	line("rpc_transport", "none")
	line("auth_strategy", "http_basic")
	line("http_basic_auth_user_file", p.htpasswd)
	// A fixed conductor name: reservations and the hash ring survive a host rename.
	line("host", "anvil-ironic")
	line("use_stderr", "true")
	line("debug", "false")
	line("default_log_levels", quietLogLevels)
	for _, kv := range interfaces {
		line(kv[0], kv[1])
	}
	// Debian's isolinux package puts it here, not where Ironic looks by default; Ironic
	// finds ldlinux.c32 (syslinux-common) itself.
	line("isolinux_bin", isolinuxBin)
	// UEFI boot ISOs: the ESP's GRUB reads the grub.cfg Ironic writes at this path
	// (hack/esp/embedded.cfg), rendered from anvil's template (see grubTemplate).
	if c.ESPImage != "" {
		line("esp_image", c.ESPImage)
	}
	line("grub_config_path", grubConfigPath)
	line("grub_config_template", p.grubTemplate)
	b.WriteString("\n[database]\n")
	line("connection", "sqlite:///"+p.db)
	b.WriteString("\n[dhcp]\n")
	line("dhcp_provider", "none")
	b.WriteString("\n[conductor]\n")
	// Ironic's cleaning needs its agent ramdisk; without one the site's eraser wipes
	// released servers (the Host controller), so Ironic's cleaning stays off.
	line("automated_clean", c.Cleaning != CleanNone)
	// A server that powers itself off (the eraser, when done; a tenant's OS) is recorded as
	// off, not switched on again behind the Host controller's back, and soon.
	line("sync_power_state_interval", 10)
	line("force_power_state_during_sync", "false")
	if c.MaxConcurrentDeploy > 0 {
		line("max_concurrent_deploy", c.MaxConcurrentDeploy)
	}
	if c.MaxConcurrentClean > 0 {
		line("max_concurrent_clean", c.MaxConcurrentClean)
	}
	b.WriteString("\n[api]\n")
	line("host_ip", c.Host)
	line("port", c.Port)
	b.WriteString("\n[pxe]\n")
	line("tftp_root", p.tftp)
	b.WriteString("\n[deploy]\n")
	switch c.Cleaning {
	case CleanMetadata:
		line("erase_devices_priority", 0)
		line("erase_devices_metadata_priority", 10)
	case CleanFull:
		line("erase_devices_priority", 10)
		line("erase_devices_metadata_priority", 20)
	}
	line("http_root", p.http)
	line("http_url", "http://"+net.JoinHostPort(c.Host, strconv.Itoa(c.BootFilesPort)))
	b.WriteString("\n[inspector]\n")
	// The inspect interface "inspector" reaches ironic-inspector here (keystoneauth's
	// http_basic plugin; Ironic's own default, auth_type none, would get 401).
	line("auth_type", "http_basic")
	line("username", ironicInspectorUser)
	line("password", sec.toInspector)
	line("endpoint_override", "http://"+net.JoinHostPort(c.Host, strconv.Itoa(c.InspectorPort)))
	b.WriteString("\n[redfish]\n")
	// There is no Swift: virtual media images are published under [deploy] http_url.
	line("use_swift", "false")
	b.WriteString("\n[oslo_concurrency]\n")
	line("lock_path", p.locks)
	b.WriteString("\n[fake]\n")
	d := c.FakeDelays
	line("power_delay", d.Power)
	line("boot_delay", d.Boot)
	line("deploy_delay", d.Deploy)
	line("management_delay", d.Management)
	line("inspect_delay", d.Inspect)
	return b.String()
}
