package debian

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/testos"
)

const vmClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: debian-vm}
capabilities: {cpu: "1", memory: 1Gi}
`

// vmMachine is a Debian Machine on anvil dev's QEMU pool of ARCH, with the user data in
// its Secret, one metaData key and a data disk (kept when the Machine is reimaged).
const vmMachine = `
apiVersion: v1
kind: Secret
metadata: {name: debian-ARCH-user-data, namespace: default}
stringData:
  userData: |
USERDATA
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: debian-ARCH, namespace: default}
spec:
  machineClassRef: {name: debian-vm}
  architecture: ARCH
  image: IMAGE
  hostname: debian-ARCH
  metaData: {anvil-test: value-ARCH}
  userDataRef: {name: debian-ARCH-user-data}
  machinePoolSelector: {compute.anvil.dev/runtime: qemu}
  volumes:
  - name: root
    image: {size: 4Gi}
  - name: data
    emptyDisk: {size: 1Gi}
  networkInterfaces:
  - name: nic0
    ephemeral:
      networkInterfaceTemplate:
        spec: {network: debian-test}
`

// Debian 12 on every kind of pool, from one anvil dev: the disk form on the QEMU pool of
// each architecture (NoCloud seed) and the RAM form on an emulated server of each
// architecture, deployed by Ironic (config drive). All four boot at once.
func TestDebian(t *testing.T) {
	d := startDevWithDebian(t, true)
	t.Run("BootsOnQemuPoolsWithItsOwnCloudInit", func(t *testing.T) {
		t.Parallel()
		testQemuPools(t, d)
	})
	t.Run("BootsOnServersFromRAMWithItsConfigDrive", func(t *testing.T) {
		t.Parallel()
		testServers(t, d)
	})
	t.Run("DemoSamplesLogInWithAnvilDevsKey", func(t *testing.T) { testDemoSamples(t, d) })
}

// testQemuPools: on the QEMU pool of each architecture, Debian configured by its own
// cloud-init from the NoCloud seed the runtime writes: asked over SSH, cloud-init is done
// without errors, systemd is running, the kernel is the pool's architecture, and the user
// data's user, host key, files and commands and the Machine's hostname and metaData are
// there.
func testQemuPools(t *testing.T, d *debianDev) {
	logins := map[computev1alpha1.Architecture]*guestssh.Identity{}
	for _, arch := range testos.Architectures {
		logins[arch] = createVM(t, d.kubeconfig, arch, d.disk)
	}
	for _, arch := range testos.Architectures {
		c := env.Login(t, d.kubeconfig, "debian-"+string(arch), logins[arch])
		checkFirstBoot(t, "debian-"+string(arch), arch, c, vmDatasource)
		c.Close()
		checkConsole(t, d, "debian-"+string(arch))
	}
}

// checkConsole reads a booted Debian Machine's serial console through the API, as its
// tenant would (docs/console.md): its log has cloud-init's last word, and at the console
// itself an Enter gets the login prompt of the getty systemd runs on the serial port, with
// the Machine's hostname. The prompt is asked of the live getty rather than looked for in
// the log: where in the boot's output it first appears depends on the guest's speed (CI's
// run of session 30's submission, the guest at a quarter of its usual speed, had cloud-init
// finished and no prompt in the log after two minutes).
func checkConsole(t *testing.T, d *debianDev, name string) {
	t.Helper()
	logPath := "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/default/machines/" + name + "/consolelog"
	env.WaitKubectlFor(t, d.kubeconfig, 2*time.Minute, "hold cloud-init's finish",
		func(log string) bool {
			return strings.Contains(log, "Cloud-init v.") && strings.Contains(log, " finished at ")
		},
		"get", "--raw", logPath)
	prompt := name + " login:"
	console := env.StartConsole(t, d.kubeconfig, "default", name)
	console.Await(t, "attached")
	// Enter again while waiting: a getty that had not started yet when the first was typed
	// prompts once it has, but one Enter more gets a prompt printed after the attach.
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		if _, err := console.Stdin.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
		if console.AwaitWithin(prompt, 20*time.Second) {
			console.Stop()
			return
		}
	}
	log, _ := env.Kubectl(t, d.kubeconfig, "", "get", "--raw", logPath)
	t.Fatalf("no %q at %s's console within 3 minutes of Enters; the console printed:\n%s\nthe log's lines with \"login\" in them:\n%s",
		prompt, name, console.Output(), linesWith(log, "login"))
}

// linesWith is s's lines that contain sub.
func linesWith(s, sub string) string {
	var kept []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// debianDev is the package's anvil dev with the Debian image published.
type debianDev struct {
	kubeconfig, state, registryPort string
	// disk and ram are the references of the disk form (anvil/debian:12) and the RAM form
	// (anvil/debian-ram:12), which anvil dev publishes (--debian).
	disk, ram string
}

func (d *debianDev) registry() string { return "127.0.0.1:" + d.registryPort }

// devOptions is what a test needs of anvil dev beside its QEMU pools and the Debian image.
type devOptions struct {
	// amd64Servers and arm64Servers are the metal pool's emulated servers (none: no metal
	// pool).
	amd64Servers, arm64Servers int
	// packageProxy, when set, is the builders' package proxy; the builders then run the
	// build agent built from this checkout.
	packageProxy string
}

// startDevWithDebian starts anvil dev with its QEMU pools and, with servers, its metal pool
// with one emulated server of each architecture, publishing the Debian image (--debian), and
// creates the Machines' classes.
func startDevWithDebian(tb testing.TB, servers bool) *debianDev {
	tb.Helper()
	if servers {
		return startDev(tb, devOptions{amd64Servers: 1, arm64Servers: 1})
	}
	return startDev(tb, devOptions{})
}

// startDev starts anvil dev as o says, publishing the Debian image (--debian, as make demo
// DEBIAN=1 has it do), and creates the Machines' classes.
func startDev(tb testing.TB, o devOptions) *debianDev {
	tb.Helper()
	// A short folder: the QEMU pools' QMP sockets live under it, within Linux's 107 bytes.
	state, err := os.MkdirTemp("", "dv")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(state) })
	// VMs outlive anvil dev by design: after it stops, end the ones it started.
	tb.Cleanup(func() { devproc.KillQemu(state) })
	registryPort := devproc.FreePort(tb)
	testos.DebianDisk(tb) // fails loudly, naming make debian, when it is missing
	testos.DebianRAM(tb)
	args := []string{"--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "",
		"--apiserver-port", devproc.FreePort(tb), "--etcd-port", devproc.FreePort(tb), "--etcd-peer-port", devproc.FreePort(tb),
		"--registry-port", registryPort, "--debian", filepath.Join(env.BinDir, "debian")}
	servers := o.amd64Servers+o.arm64Servers > 0
	if servers {
		args = append(args, "--metal-image-port", devproc.FreePort(tb), "--bmc-port", devproc.FreePort(tb),
			"--emulated-servers", fmt.Sprint(o.amd64Servers), "--emulated-arm64-servers", fmt.Sprint(o.arm64Servers))
	} else {
		args = append(args, "--metal-pool=false")
	}
	if o.packageProxy != "" {
		args = append(args, "--test-os", testos.Dir(tb), "--agents", buildAgents(tb), "--package-proxy", o.packageProxy)
	}
	dv := env.StartDev(tb, args...)
	tb.Cleanup(func() { dv.Stop(syscall.SIGTERM) })
	d := &debianDev{kubeconfig: filepath.Join(state, "kubeconfig"), state: state, registryPort: registryPort}
	d.disk, d.ram = d.registry()+"/"+dev.DebianRepository, d.registry()+"/"+dev.DebianRAMRepository
	env.Apply(tb, d.kubeconfig, vmClass)
	if servers {
		env.Apply(tb, d.kubeconfig, serverClass)
	}
	return d
}

// createVM creates the Machine debian-ARCH and returns the login its user data allows.
func createVM(tb testing.TB, kubeconfig string, arch computev1alpha1.Architecture, image string) *guestssh.Identity {
	tb.Helper()
	return createMachine(tb, kubeconfig, vmMachine, arch, image)
}

// createMachine creates the Machine of template (vmMachine, serverMachine) for arch,
// booting image, and returns the login its user data allows.
func createMachine(tb testing.TB, kubeconfig, template string, arch computev1alpha1.Architecture, image string) *guestssh.Identity {
	tb.Helper()
	id, err := guestssh.NewIdentity("anvil")
	if err != nil {
		tb.Fatal(err)
	}
	env.Apply(tb, kubeconfig, machineYAML(template, arch, image, id))
	return id
}

// datasource is how a kind of pool hands cloud-init its first-boot data: the datasource
// cloud-init must have used, and where it puts the Machine's metaData keys.
type datasource struct {
	name     string // as cloud-init status --long names it
	metaData string // the cloud-init query path of the metaData key anvil-test
}

var (
	// vmDatasource: the QEMU runtime's NoCloud seed; metaData keys are meta-data's own.
	vmDatasource = datasource{"DataSourceNoCloud", "ds.meta_data.anvil-test"}
	// serverDatasource: the metal runtime's config drive; metaData keys are under meta,
	// where OpenStack puts an instance's own (internal/runtime/metal/configdrive.go).
	serverDatasource = datasource{"DataSourceConfigDrive", "ds.meta_data.meta.anvil-test"}
)

// checkFirstBoot asks Machine name's guest of arch, logged in as c, what its first boot
// did with the data ds handed it.
func checkFirstBoot(t *testing.T, name string, arch computev1alpha1.Architecture, c *ssh.Client, ds datasource) {
	t.Helper()
	for _, check := range []struct {
		command, want string
	}{
		// --wait: SSH can answer before cloud-init's final stage (runcmd) is over.
		{"cloud-init status --wait --long", "status: done"},
		{"cloud-init status --long", ds.name},
		{"systemctl is-system-running --wait", "running"},
		{"uname -m", testos.UnameMachine(arch)},
		{"hostname", name},
		{"cat /etc/anvil/marker", "marker-" + string(arch)},
		{"cat /var/lib/anvil/runcmd", "runcmd ran as root"},
		{"sudo cloud-init query " + ds.metaData, "value-" + string(arch)},
		{"id -un", "anvil"},
	} {
		out, err := guestssh.Run(c, check.command)
		if err != nil || !strings.Contains(out, check.want) {
			t.Errorf("%s: %q = %q (%v), want it to say %q", name, check.command, strings.TrimSpace(out), err, check.want)
		}
	}
	// No datasource or module errors in cloud-init's own log.
	if out, _ := guestssh.Run(c, "sudo grep -E 'WARNING|ERROR|Traceback' /var/log/cloud-init.log"); strings.TrimSpace(out) != "" {
		t.Errorf("%s: cloud-init's log has warnings or errors:\n%s", name, out)
	}
}

// machineYAML is template (vmMachine, serverMachine) for arch, booting image, with user
// data logging id in.
func machineYAML(template string, arch computev1alpha1.Architecture, image string, id *guestssh.Identity) string {
	indented := "    " + strings.ReplaceAll(strings.TrimRight(userData(arch, id), "\n"), "\n", "\n    ")
	y := strings.ReplaceAll(template, "USERDATA", indented)
	y = strings.ReplaceAll(y, "IMAGE", image)
	return strings.ReplaceAll(y, "ARCH", string(arch))
}

// userData is the cloud-config of the tests' Machines of arch: id's user and host key, a
// file and a command.
func userData(arch computev1alpha1.Architecture, id *guestssh.Identity) string {
	return "#cloud-config\n" + id.CloudConfig() + fmt.Sprintf(`write_files:
  - path: /etc/anvil/marker
    content: marker-%s
runcmd:
  - [sh, -c, "mkdir -p /var/lib/anvil && echo runcmd ran as $(id -un) > /var/lib/anvil/runcmd"]
`, arch)
}
