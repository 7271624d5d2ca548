package debian

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkServerFirstBootAgainstIronicByHand: for each architecture, a Debian Machine on
// an emulated server, from its creation (the server inspected and Available) until SSH
// lets the user in and cloud-init says done, against the same deploy scripted on Ironic's
// API by hand: an Ironic of its own (same build, same configuration as anvil's), a server
// of the same spec behind a BMC emulator of its own, the RAM form's kernel and initramfs
// served from disk, a config drive with the same user data and metadata. One server boots
// at a time: anvil's is deleted, and wiped by its eraser, before the one by hand starts.
// Reported: seconds each way and their ratio (anvil / by hand) per architecture.
//
//	go test -run '^$' -bench ServerFirstBoot -benchtime 1x -timeout 90m ./test/debian
func BenchmarkServerFirstBootAgainstIronicByHand(b *testing.B) {
	d := startDevWithDebian(b, true)
	hand := startIronicByHand(b)
	for i := 0; i < b.N; i++ {
		for _, arch := range testos.Architectures {
			server, name := emulatedServerOf(arch), "debian-server-"+string(arch)
			waitHostAvailable(b, d, server)
			start := time.Now()
			id := createMachine(b, d.kubeconfig, serverMachine, arch, d.ram)
			c := env.Login(b, d.kubeconfig, name, id)
			waitCloudInit(b, c)
			anvil := time.Since(start)
			c.Close()
			if out, err := env.Kubectl(b, d.kubeconfig, "", "delete", "machine", name, "--timeout", "5m"); err != nil {
				b.Fatalf("kubectl delete: %v\n%s", err, out)
			}
			waitHostAvailable(b, d, server) // wiped: nothing else runs beside the deploy by hand

			byHand := hand.deploy(b, arch, name, id)
			b.ReportMetric(anvil.Seconds(), "s-anvil-"+string(arch))
			b.ReportMetric(byHand.Seconds(), "s-byhand-"+string(arch))
			b.ReportMetric(anvil.Seconds()/byHand.Seconds(), "ratio-"+string(arch))
			b.Logf("%s: anvil %s, Ironic by hand %s, ratio %.2f", arch, anvil.Round(time.Second), byHand.Round(time.Second), anvil.Seconds()/byHand.Seconds())
		}
	}
}

// emulatedServerOf is anvil dev's emulated server of arch (it has one of each).
func emulatedServerOf(arch computev1alpha1.Architecture) string {
	for _, s := range dev.EmulatedSpecs(1, 1) {
		if s.Architecture == arch {
			return s.Name
		}
	}
	panic("anvil dev has no emulated server of " + string(arch))
}

// waitHostAvailable waits until anvil dev's Host server is Available with no consumer.
func waitHostAvailable(tb testing.TB, d *debianDev, server string) {
	tb.Helper()
	env.WaitKubectlFor(tb, d.kubeconfig, 15*time.Minute, server+" Available and free", func(s string) bool { return s == "Available/" },
		"get", "host", server, "-n", dev.MetalNamespace, "-o", "jsonpath={.status.provisioningState}/{.spec.consumerRef.name}")
}

// ironicByHand is an Ironic and emulated servers driven by the benchmark itself, as a
// team scripting Ironic would: no anvil between them.
type ironicByHand struct {
	api     ironictest.API
	emu     *bmcemu.Emulator
	specs   map[computev1alpha1.Architecture]bmcemu.Spec
	files   string // the URL the RAM form's folder is served at
	ramDir  string
	bmcUser string
	bmcPass string
}

// startIronicByHand starts an Ironic configured as anvil dev's (the same ESP for UEFI
// boot ISOs, no cleaning), a BMC emulator with servers of anvil dev's specs (each with an
// SSH forward), and a file server for the RAM form.
func startIronicByHand(tb testing.TB) *ironicByHand {
	tb.Helper()
	esp := testos.ESPImage(tb)
	irc := ironictest.Start(tb, func(c *ironic.Config) { c.ESPImage = esp })
	h := &ironicByHand{api: ironictest.NewAPI(irc),
		specs: map[computev1alpha1.Architecture]bmcemu.Spec{}, ramDir: testos.DebianRAM(tb), bmcUser: "admin", bmcPass: "by-hand-bmc-password"}
	var specs []bmcemu.Spec
	for _, s := range dev.EmulatedSpecs(1, 1) {
		port, err := vm.FreeLoopbackPort()
		if err != nil {
			tb.Fatal(err)
		}
		s.SSHPort = port
		h.specs[s.Architecture] = s
		specs = append(specs, s)
	}
	state, err := os.MkdirTemp("", "dh") // short: QMP sockets live under it
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(state) })
	if h.emu, err = bmcemu.Start(bmcemu.Config{StateDir: state, Username: h.bmcUser, Password: h.bmcPass, Servers: specs}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = h.emu.Close()
		_ = bmcemu.PowerOffAll(state) // servers outlive their BMC
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(h.ramDir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	h.files = "http://" + l.Addr().String()
	return h
}

// deploy enrols arch's server in Ironic, makes it available, and then times a deploy of
// the RAM form with a config drive of the tests' user data (logging id in) and metadata,
// until id logs in over the server's SSH forward and cloud-init is done.
func (h *ironicByHand) deploy(tb testing.TB, arch computev1alpha1.Architecture, name string, id *guestssh.Identity) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := h.specs[arch]
	bmc, err := url.Parse(h.emu.Address(s.Name))
	if err != nil {
		tb.Fatal(err)
	}
	node := map[string]any{}
	err = h.api.Call(ctx, http.MethodPost, "v1/nodes", map[string]any{
		"name": s.Name, "driver": "redfish",
		"driver_info": map[string]any{
			"redfish_address": "http://" + bmc.Host, "redfish_system_id": bmc.Path, "redfish_username": h.bmcUser, "redfish_password": h.bmcPass,
			"config_via_removable": true,
		},
		"boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk", "management_interface": "redfish",
		"power_interface": "redfish", "inspect_interface": "no-inspect", "bios_interface": "no-bios", "console_interface": "no-console",
		"raid_interface": "no-raid", "rescue_interface": "no-rescue", "vendor_interface": "no-vendor",
		"properties": map[string]any{"cpu_arch": map[computev1alpha1.Architecture]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]},
	}, &node, http.StatusCreated)
	if err != nil {
		tb.Fatalf("enrolling %s: %v", s.Name, err)
	}
	uuid, _ := node["uuid"].(string)
	if uuid == "" {
		tb.Fatalf("enrolling %s: Ironic answered no uuid: %v", s.Name, node)
	}
	tb.Cleanup(func() { h.undeploy(uuid) })
	h.provision(ctx, tb, uuid, map[string]any{"target": "manage"}, "manageable")
	h.provision(ctx, tb, uuid, map[string]any{"target": "provide"}, "available")

	cmdline, err := os.ReadFile(filepath.Join(h.ramDir, string(arch), "cmdline"))
	if err != nil {
		tb.Fatal(err)
	}
	bootMode := map[string]string{"Legacy": "bios", "UEFI": "uefi"}[s.BootMode()]
	metaData := map[string]any{"uuid": "by-hand-" + string(arch), "name": name, "hostname": name, "local-hostname": name,
		"meta": map[string]string{"anvil-test": "value-" + string(arch)}}

	start := time.Now()
	patch := []map[string]any{{"op": "add", "path": "/instance_info", "value": map[string]any{
		"kernel":                   h.files + "/" + string(arch) + "/kernel",
		"ramdisk":                  h.files + "/" + string(arch) + "/initramfs",
		"ramdisk_kernel_arguments": strings.TrimSpace(string(cmdline)),
		"capabilities":             map[string]any{"boot_mode": bootMode},
	}}}
	if err := h.api.Call(ctx, http.MethodPatch, "v1/nodes/"+uuid, patch, nil, http.StatusOK); err != nil {
		tb.Fatalf("setting %s's instance_info: %v", s.Name, err)
	}
	h.provision(ctx, tb, uuid, map[string]any{"target": "active",
		"configdrive": map[string]any{"meta_data": metaData, "user_data": userData(arch, id)}}, "active")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.SSHPort))
	c, err := id.Dial(ctx, addr)
	if err != nil {
		b, _ := os.ReadFile(h.emu.ConsolePath(s.Name))
		tb.Fatalf("%s by hand: %v\nthe end of its console:\n%s", s.Name, err, devproc.LastLines(string(b), 60))
	}
	defer c.Close()
	waitCloudInit(tb, c)
	took := time.Since(start)
	// The same first boot as anvil's: the same checks pass.
	if out, err := guestssh.Run(c, "sudo cloud-init query ds.meta_data.meta.anvil-test"); err != nil || !strings.Contains(out, "value-"+string(arch)) {
		tb.Errorf("%s by hand: metadata %q (%v)", s.Name, out, err)
	}
	return took
}

// provision asks node uuid for a provision target and waits until it reaches want, failing
// on an error state.
func (h *ironicByHand) provision(ctx context.Context, tb testing.TB, uuid string, target map[string]any, want string) {
	tb.Helper()
	if err := h.api.Call(ctx, http.MethodPut, "v1/nodes/"+uuid+"/states/provision", target, nil, http.StatusAccepted); err != nil {
		tb.Fatalf("node %s: provision %v: %v", uuid, target["target"], err)
	}
	for {
		var n struct {
			ProvisionState string `json:"provision_state"`
			LastError      string `json:"last_error"`
		}
		if err := h.api.Call(ctx, http.MethodGet, "v1/nodes/"+uuid, nil, &n, http.StatusOK); err != nil {
			tb.Fatalf("node %s: %v", uuid, err)
		}
		switch {
		case n.ProvisionState == want:
			return
		case strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "error":
			tb.Fatalf("node %s: %s, not %s: %s", uuid, n.ProvisionState, want, n.LastError)
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("node %s: not %s in time (%s)", uuid, want, n.ProvisionState)
		case <-time.After(time.Second):
		}
	}
}

// undeploy tears the deployment down and forgets the node, so its server powers off.
func (h *ironicByHand) undeploy(uuid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_ = h.api.Call(ctx, http.MethodPut, "v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "deleted"}, nil, http.StatusAccepted)
	for ctx.Err() == nil {
		var n struct {
			ProvisionState string `json:"provision_state"`
		}
		if h.api.Call(ctx, http.MethodGet, "v1/nodes/"+uuid, nil, &n, http.StatusOK) != nil || n.ProvisionState == "available" || n.ProvisionState == "clean failed" {
			break
		}
		time.Sleep(time.Second)
	}
	_ = h.api.Call(ctx, http.MethodDelete, "v1/nodes/"+uuid, nil, nil, http.StatusNoContent)
}
