package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	ironicprov "github.com/anvil-dev/anvil/internal/provisioner/ironic"
)

// Emulated servers: QEMU machines behind anvil's BMC emulator, run as a process of its own
// (`anvil bmc-emulator`, anvil dev's servers) so it can be killed and started again, and
// enrolled as Hosts of the metal pool beside its fake hardware, so Ironic really powers and
// boots them while the run kills the emulator, Ironic and the metal runtime.

// startEmulator starts the emulator's process on port for cfg's servers and enrols them
// as Hosts, with the BMC credentials anvil dev uses (a Secret in the metal namespace). The
// password reaches the process in a file of the run's folder, never on a command line.
func (cl *cluster) startEmulator(ctx context.Context, cfg config, port int) error {
	user, password, err := dev.EmulatedCredentials(ctx, cl.c)
	if err != nil {
		return err
	}
	passwordFile := filepath.Join(cl.dir, "bmc-password")
	if err := os.WriteFile(passwordFile, []byte(password), 0o600); err != nil {
		return err
	}
	cl.serversDir = filepath.Join(cl.dir, "servers")
	cl.bmcListen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cl.servers = dev.EmulatedSpecs(cfg.servers, cfg.arm64Servers)
	cl.emulator = newProc(cl.dir, "emulator", nil, cfg.anvil, "bmc-emulator", "--state-dir", cl.serversDir,
		"--listen", cl.bmcListen, "--servers", strconv.Itoa(cfg.servers), "--arm64-servers", strconv.Itoa(cfg.arm64Servers),
		"--username", user, "--password-file", passwordFile)
	if err := cl.emulator.start(); err != nil {
		return err
	}
	// Enrolled once it answers: the Host controller registers a Host with Ironic at once.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + cl.bmcListen + "/redfish/v1")
		if err == nil {
			resp.Body.Close()
			break
		}
		if cl.emulator.exited() || time.Now().After(deadline) {
			return fmt.Errorf("the BMC emulator does not answer on %s (log %s): %w", cl.bmcListen, cl.emulator.log, err)
		}
	}
	return dev.EnrolEmulatedServers(ctx, cl.c, cl.bmcListen, cl.servers, func(string) int { return 0 })
}

// readyLine is the test OS's line once it has booted and read its first-boot data; the
// metal runtime makes the Machine's name its hostname.
var readyLine = regexp.MustCompile(`ANVIL-TESTOS-READY arch=\S+ hostname=(\S+) `)

// bootsOn counts the boots a server's console shows, by the hostname each boot read.
func bootsOn(console []byte) map[string]int {
	boots := map[string]int{}
	for _, m := range readyLine.FindAllSubmatch(console, -1) {
		boots[string(m[1])]++
	}
	return boots
}

// observeServers reads each emulated server's QEMU processes and console.
func (cl *cluster) observeServers(ctx context.Context, o *observed) error {
	for _, s := range cl.servers {
		console, err := os.ReadFile(filepath.Join(cl.serversDir, s.Name, "console.log"))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		o.servers = append(o.servers, server{name: s.Name, pids: bmcemu.ServerProcesses(cl.serversDir, s.Name), boots: bootsOn(console)})
	}
	return nil
}

// observeIronic reads Ironic's node of each Host, as the metal runtime's Ironic has it.
func (cl *cluster) observeIronic(ctx context.Context, o *observed) error {
	var secret corev1.Secret
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: dev.MetalNamespace, Name: site.CredentialsSecret}, &secret); err != nil {
		return fmt.Errorf("Ironic's credentials: %w", err)
	}
	// A client per reading, without keep-alive: an idle connection left behind at each
	// reading (every 2 s) filled Ironic's pool of API connections within minutes, and
	// Ironic stopped answering anyone.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	p, err := ironicprov.New(ctx, ironicprov.Options{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/", cl.ironicPort),
		Username: string(secret.Data[ironic.SecretUsernameKey]), Password: string(secret.Data[ironic.SecretPasswordKey]), HTTPClient: hc})
	if err != nil {
		return fmt.Errorf("reaching Ironic: %w", err)
	}
	defer p.Close()
	o.nodes = map[string]provisioner.Node{}
	for _, h := range o.hosts {
		n, err := p.Get(ctx, provisioner.NodeName(types.NamespacedName{Namespace: h.Namespace, Name: h.Name}))
		if errors.Is(err, provisioner.ErrNotFound) {
			continue // not registered (yet): nothing of Ironic's to compare
		}
		if err != nil {
			return fmt.Errorf("Ironic's node of Host %s: %w", h.Name, err)
		}
		o.nodes[h.Name] = n
	}
	return nil
}

// server is what the run sees of one emulated server.
type server struct {
	name string
	// pids are its live QEMU processes (bmcemu.ServerProcesses).
	pids []int
	// boots counts the boots on its console by hostname, which is the Machine's name.
	boots map[string]int
}

// hostOf is the Host of an emulated server: enrolled under the server's name.
func hostOf(hosts []metalv1alpha1.Host, name string) *metalv1alpha1.Host {
	for i := range hosts {
		if hosts[i].Name == name {
			return &hosts[i]
		}
	}
	return nil
}
