package metalservers

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/metalpool"
	"github.com/anvil-dev/anvil/test/testos"
)

const bmcUser, bmcPassword = "admin", "emulated-bmc-password"

var emulatedServer = bmcemu.Spec{Name: "server-1", CPUs: 2, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:aa:00:01"}

// startEmulator runs a Redfish BMC in front of QEMU servers until the test ends, then ends
// the servers, which outlive the emulator.
func startEmulator(t *testing.T, servers ...bmcemu.Spec) *bmcemu.Emulator {
	t.Helper()
	dir, err := os.MkdirTemp("", "anvil-bmc-")
	if err != nil {
		t.Fatal(err)
	}
	e, err := bmcemu.Start(bmcemu.Config{StateDir: dir, Username: bmcUser, Password: bmcPassword, Servers: servers,
		Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 0})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("stopping the BMC emulator: %v", err)
		}
		if err := bmcemu.PowerOffAll(dir); err != nil {
			t.Errorf("ending the emulated servers: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return e
}

// restartEmulator stops e as anvil dev's Ctrl-C stops it (its servers run on) and starts
// it again on the same state and address, as the next anvil dev does.
func restartEmulator(t *testing.T, e *bmcemu.Emulator) *bmcemu.Emulator {
	t.Helper()
	cfg := e.Config()
	if err := e.Close(); err != nil {
		t.Fatalf("stopping the BMC emulator: %v", err)
	}
	again, err := bmcemu.Start(cfg)
	if err != nil {
		t.Fatalf("starting the BMC emulator again: %v", err)
	}
	t.Cleanup(func() { _ = again.Close() })
	return again
}

// emulatedHost is a Host for an emulated server, its BMC credentials in a Secret.
func emulatedHost(t *testing.T, ns string, e *bmcemu.Emulator, s bmcemu.Spec, password string) *metalv1alpha1.Host {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.Name + "-bmc"},
		Data: map[string][]byte{"username": []byte(bmcUser), "password": []byte(password)}}
	rig.Create(t, secret)
	h := &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.Name},
		Spec: metalv1alpha1.HostSpec{
			BMC:            metalv1alpha1.BMC{Address: e.Address(s.Name), CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: secret.Name}},
			BootMACAddress: s.MAC,
			Architecture:   computev1alpha1.ArchitectureAMD64,
		},
	}
	if s.Architecture != "" {
		h.Spec.Architecture = s.Architecture
	}
	h.Spec.BootMode = metalv1alpha1.BootMode(s.BootMode())
	return h
}

// pushTestOS publishes the test OS (kernel and initramfs, no disk) of arch and returns its
// reference.
func pushTestOS(t *testing.T, arch computev1alpha1.Architecture) string {
	t.Helper()
	dir := testos.Dir(t)
	ref := rig.Env.Registry.Host + "/metal/testos-" + string(arch) + ":1"
	if _, _, err := osimage.PushDirs(context.Background(), ref, map[computev1alpha1.Architecture]string{arch: filepath.Join(dir, string(arch))}, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// redfishPower is the server's power state as its BMC reports it.
func redfishPower(t *testing.T, e *bmcemu.Emulator, name string) string {
	t.Helper()
	addr := strings.TrimPrefix(e.Address(name), "redfish+")
	req, err := http.NewRequest(http.MethodGet, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(bmcUser, bmcPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sys struct{ PowerState string }
	if err := json.NewDecoder(resp.Body).Decode(&sys); err != nil {
		t.Fatal(err)
	}
	return sys.PowerState
}

// waitConsole waits until the server's console shows want n times, and returns it.
func waitConsole(t *testing.T, path, want string, n int, timeout time.Duration) string {
	t.Helper()
	var raw []byte
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		raw, _ = os.ReadFile(path)
		return strings.Count(string(raw), want) >= n, nil
	})
	if err != nil {
		t.Fatalf("console %s never showed %q %d times:\n%s", path, want, n, devproc.LastLines(string(raw), 30))
	}
	return string(raw)
}

// A Host with an emulated server behind a Redfish BMC is inspected through the BMC (its
// HardwareData is the VM's), a tenant's Machine is deployed on it by Ironic (virtual
// media, ramdisk deploy) and boots the Machine's image with its own first-boot config;
// power follows the Machine; deleted, the server is powered off with its media ejected,
// and a second tenant's Machine boots its own image and marker on it. Ironic killed with
// its database deleted adopts the running server without rebooting it; so does the BMC
// emulator stopped and started again (anvil dev's Ctrl-C and next start): the Machine
// stays Running with one boot, and powered off and on it boots its image again (the BMC
// kept the media). Deleted, no QEMU of the server is left.
func TestEmulatedServerBootsTenantMachines(t *testing.T) {
	ctx := context.Background()
	tt := startTwoTenants(t, emulatedServer, "emulated-small", "emulated")
	infra, tenantA, tenantB, e, class, p := tt.infra, tt.a, tt.b, tt.e, tt.class, tt.pool
	console := e.ConsolePath(emulatedServer.Name)
	image := pushTestOS(t, computev1alpha1.ArchitectureAMD64)

	// Inspected out of band: what the BMC reports is the VM's.
	rig.WaitHost(t, infra, emulatedServer.Name, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
	hw := &metalv1alpha1.HardwareData{}
	if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: infra, Name: emulatedServer.Name}, hw); err != nil {
		t.Fatalf("HardwareData: %v", err)
	}
	if hw.Spec.CPU.Count != int32(emulatedServer.CPUs) || hw.Spec.MemoryMiB != emulatedServer.MemoryMiB || !hasMAC(hw, emulatedServer.MAC) {
		t.Errorf("HardwareData %+v, want the VM's %d CPUs, %d MiB and NIC %s", hw.Spec, emulatedServer.CPUs, emulatedServer.MemoryMiB, emulatedServer.MAC)
	}

	deploy := func(ns, name, marker string) {
		t.Helper()
		runMachine(t, ns, name, class.Name, image, "#cloud-config\n# anvil-marker="+marker+"\n")
	}
	ready := "ANVIL-TESTOS-READY arch=x86_64 "
	deploy(tenantA, "alpha", "alpha")
	out := waitConsole(t, console, "marker=alpha", 1, 3*time.Minute)
	if strings.Count(out, ready) != 1 {
		t.Fatalf("the server booted %d times for one deployment:\n%s", strings.Count(out, ready), devproc.LastLines(out, 30))
	}
	if got := redfishPower(t, e, emulatedServer.Name); got != "On" {
		t.Errorf("the BMC says the deployed server is %s", got)
	}

	// Ironic loses its database: the running server is adopted, not rebooted.
	ironicLosesItsDatabase(t, p)
	rig.WaitHost(t, infra, emulatedServer.Name, "adopted", 3*time.Minute, func(h *metalv1alpha1.Host) bool {
		node, err := p.Site.Provisioner.Get(ctx, infra+"~"+h.Name)
		return metalpool.Provisioned(h) && err == nil && node.State == "Active"
	})
	rig.MachineState(t, tenantA, "alpha", "still Running", 10*time.Second, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})
	time.Sleep(5 * time.Second) // a reboot would print the ready line again within seconds
	if raw, _ := os.ReadFile(console); strings.Count(string(raw), ready) != 1 {
		t.Fatalf("adopting the server rebooted it:\n%s", devproc.LastLines(string(raw), 30))
	}

	// The BMC emulator restarts: the server runs on, the same QEMU, adopted.
	state, qemu := e.Config().StateDir, bmcemu.ServerProcesses(e.Config().StateDir, emulatedServer.Name)
	e = restartEmulator(t, e)
	if got := bmcemu.ServerProcesses(state, emulatedServer.Name); len(qemu) != 1 || !slices.Equal(got, qemu) {
		t.Fatalf("the server's QEMU was %v before the emulator's restart and is %v after, want the same one", qemu, got)
	}
	if got := redfishPower(t, e, emulatedServer.Name); got != "On" {
		t.Errorf("the restarted BMC says the running server is %s", got)
	}
	rig.MachineState(t, tenantA, "alpha", "still Running after the BMC's restart", 10*time.Second, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})
	time.Sleep(5 * time.Second)
	if raw, _ := os.ReadFile(console); strings.Count(string(raw), ready) != 1 {
		t.Fatalf("restarting the BMC rebooted the server:\n%s", devproc.LastLines(string(raw), 30))
	}

	// Power follows the Machine, and the BMC says so.
	rig.SetPower(t, tenantA, "alpha", computev1alpha1.PowerOff)
	rig.MachineState(t, tenantA, "alpha", "Shutdown", 2*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateShutdown
	})
	if got := redfishPower(t, e, emulatedServer.Name); got != "Off" {
		t.Errorf("the BMC says the server is %s after the Machine was powered off", got)
	}
	if got := bmcemu.ServerProcesses(state, emulatedServer.Name); len(got) != 0 {
		t.Errorf("the adopted QEMU %v still runs after the Machine was powered off", got)
	}
	rig.SetPower(t, tenantA, "alpha", computev1alpha1.PowerOn)
	rig.MachineState(t, tenantA, "alpha", "Running again", 2*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})
	waitConsole(t, console, "marker=alpha", 2, 3*time.Minute)
	if got := bmcemu.ServerProcesses(state, emulatedServer.Name); len(got) != 1 {
		t.Errorf("the server powered on again runs QEMU %v, want one", got)
	}

	// Deleted: powered off, media ejected, the Host free for the next tenant.
	if err := rig.Env.Client.Delete(ctx, &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "alpha"}}); err != nil {
		t.Fatal(err)
	}
	rig.WaitHost(t, infra, emulatedServer.Name, "Available and free again", 3*time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Spec.ConsumerRef == nil && h.Status.Image == nil
	})
	if got := redfishPower(t, e, emulatedServer.Name); got != "Off" {
		t.Errorf("the BMC says the released server is %s", got)
	}
	if inserted := e.InsertedMedia(emulatedServer.Name); len(inserted) != 0 {
		t.Errorf("the released server still holds media %v", inserted)
	}
	if got := bmcemu.ServerProcesses(state, emulatedServer.Name); len(got) != 0 {
		t.Errorf("the released server's QEMU %v still runs", got)
	}

	deploy(tenantB, "beta", "beta")
	out = waitConsole(t, console, "marker=beta", 1, 3*time.Minute)
	if last := out[strings.LastIndex(out, ready):]; strings.Contains(last, "alpha") {
		t.Errorf("the second tenant's boot shows the first's data:\n%s", last)
	}
	deleteMachine(t, tenantB, "beta", 3*time.Minute)
}

// runMachine creates a Machine of class and image with userData as its first-boot data,
// and waits until it is Running.
func runMachine(t *testing.T, ns, name, class, image, userData string) {
	t.Helper()
	ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-user-data"},
		Data: map[string][]byte{"userData": []byte(userData)}}
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class}, Image: image,
			UserDataRef: &computev1alpha1.SecretKeySelector{Name: ud.Name, Key: "userData"}}}
	rig.Create(t, ud, m)
	rig.MachineState(t, ns, name, "Running", 5*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})
}

// ironicLosesItsDatabase kills the site's Ironic, deletes its database and waits until the
// supervisor has restarted it.
func ironicLosesItsDatabase(t *testing.T, p *pool.Pool) {
	t.Helper()
	restarts := p.Site.Ironic.Restarts()
	if err := syscall.Kill(p.Site.Ironic.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(p.Site.Ironic.LogPath()), "ironic.db")); err != nil {
		t.Fatalf("deleting Ironic's database: %v", err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return p.Site.Ironic.Restarts() > restarts, nil
	}); err != nil {
		t.Fatal("Ironic was not restarted after being killed")
	}
}

// twoTenants is one emulated server, enrolled as a Host that two tenant namespaces may
// use, a class it fits, the manager and a metal pool (which wipes released servers).
type twoTenants struct {
	infra, a, b string
	e           *bmcemu.Emulator
	class       *computev1alpha1.MachineClass
	pool        *pool.Pool
}

func startTwoTenants(t *testing.T, s bmcemu.Spec, className, poolName string, mods ...func(*site.Config)) twoTenants {
	t.Helper()
	tt := twoTenants{infra: rig.NewNamespace(t, "infra"), a: rig.NewNamespace(t, "tenant-a"), b: rig.NewNamespace(t, "tenant-b")}
	tt.e = startEmulator(t, s)
	tt.class = &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: className},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}
	policy := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: tt.infra, Name: "tenants"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{tt.a, tt.b}}}
	rig.Create(t, tt.class, policy, emulatedHost(t, tt.infra, tt.e, s, bmcPassword))
	rig.StartManager(t)
	tt.pool = rig.StartPool(t, poolName, tt.infra, func(c *site.Config) {
		for _, mod := range mods {
			mod(c)
		}
	})
	return tt
}

// deleteMachine deletes a Machine and waits until it is gone (its server released).
func deleteMachine(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	if err := rig.Env.Client.Delete(ctx, &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &computev1alpha1.Machine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Machine %s/%s was not deleted: %v", ns, name, err)
	}
}

// Emulated servers that boot UEFI, an arm64 one (AAVMF) and an amd64 one (OVMF), are
// inspected through their BMC and deployed at once by Ironic from UEFI boot ISOs (built
// around the ESP of make esp): each Machine boots its architecture's test OS with its own
// first-boot config; deleted, each server is off with no media and its Host free again.
func TestEmulatedUEFIServers(t *testing.T) {
	ctx := context.Background()
	infra, tenant := rig.NewNamespace(t, "infra"), rig.NewNamespace(t, "tenant")
	servers := []bmcemu.Spec{
		{Name: "server-arm", CPUs: 1, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:aa:00:03", Architecture: computev1alpha1.ArchitectureARM64},
		{Name: "server-uefi", CPUs: 1, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:aa:00:04", Architecture: computev1alpha1.ArchitectureAMD64, UEFI: true},
	}
	e := startEmulator(t, servers...)
	class := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "emulated-uefi"},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}
	policy := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "tenants"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{tenant}}}
	rig.Create(t, class, policy)
	for _, s := range servers {
		rig.Create(t, emulatedHost(t, infra, e, s, bmcPassword))
	}
	rig.StartManager(t)
	rig.StartPool(t, "emulated-uefi", infra, nil)

	machines := make([]*computev1alpha1.Machine, len(servers))
	for i, s := range servers {
		rig.WaitHost(t, infra, s.Name, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
		hw := &metalv1alpha1.HardwareData{}
		if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: infra, Name: s.Name}, hw); err != nil {
			t.Fatalf("HardwareData: %v", err)
		}
		if hw.Spec.Architecture != s.Architecture || hw.Spec.CPU.Count != 1 || hw.Spec.MemoryMiB != s.MemoryMiB || !hasMAC(hw, s.MAC) {
			t.Errorf("HardwareData of %s: %+v, want %s, 1 CPU, %d MiB and NIC %s", s.Name, hw.Spec, s.Architecture, s.MemoryMiB, s.MAC)
		}
		name := "on-" + s.Name
		ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name + "-user-data"},
			Data: map[string][]byte{"userData": []byte("#cloud-config\n# anvil-marker=" + name + "\n")}}
		machines[i] = &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class.Name},
				Image: pushTestOS(t, s.Architecture), Architecture: s.Architecture,
				UserDataRef: &computev1alpha1.SecretKeySelector{Name: ud.Name, Key: "userData"}}}
		rig.Create(t, ud, machines[i])
	}
	for i, s := range servers {
		rig.MachineState(t, tenant, machines[i].Name, "Running", 5*time.Minute, func(m *computev1alpha1.Machine) bool {
			return m.Status.State == computev1alpha1.MachineStateRunning
		})
		out := waitConsole(t, e.ConsolePath(s.Name), "ANVIL-TESTOS-READY arch="+testos.UnameMachine(s.Architecture)+" ", 1, 3*time.Minute)
		if !strings.Contains(out, testos.ReadyLine(s.Architecture, machines[i].Name, machines[i].Name)) {
			t.Errorf("%s booted without its Machine's first-boot config:\n%s", s.Name, devproc.LastLines(out, 20))
		}
	}

	for i, s := range servers {
		if err := rig.Env.Client.Delete(ctx, machines[i]); err != nil {
			t.Fatal(err)
		}
		rig.WaitHost(t, infra, s.Name, "Available and free again", 3*time.Minute, func(h *metalv1alpha1.Host) bool {
			return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Spec.ConsumerRef == nil && h.Status.Image == nil
		})
		if got := redfishPower(t, e, s.Name); got != "Off" {
			t.Errorf("the BMC says the released %s is %s", s.Name, got)
		}
		if inserted := e.InsertedMedia(s.Name); len(inserted) != 0 {
			t.Errorf("the released %s still holds media %v", s.Name, inserted)
		}
	}
}

// A wrong BMC password is refused by the emulated BMC: the Host says so and nothing is
// deployed or powered.
func TestEmulatedServerWrongPassword(t *testing.T) {
	infra := rig.NewNamespace(t, "infra")
	s := emulatedServer
	s.Name, s.MAC = "server-wrong", "52:54:00:aa:00:02"
	e := startEmulator(t, s)
	rig.StartSite(t, infra, nil)
	rig.Create(t, emulatedHost(t, infra, e, s, "not-the-password"))
	h := rig.WaitHost(t, infra, s.Name, "failed with CredentialsInvalid", 2*time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonCredentialsInvalid))
	if strings.Contains(metalpool.Describe(h), "not-the-password") {
		t.Errorf("the status shows the password: %s", metalpool.Describe(h))
	}
	if got := redfishPower(t, e, s.Name); got != "Off" {
		t.Errorf("the server is %s", got)
	}
}

func hasMAC(hw *metalv1alpha1.HardwareData, mac string) bool {
	for _, n := range hw.Spec.NICs {
		if strings.EqualFold(n.MACAddress, mac) {
			return true
		}
	}
	return false
}
