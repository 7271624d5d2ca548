package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Emulated servers: QEMU VMs behind anvil's Redfish BMC emulator, enrolled as Hosts of the
// metal pool, so Ironic really powers, boots (virtual media) and deploys them.
const (
	// emulatedBMCSecret holds the emulated BMC's credentials in MetalNamespace.
	emulatedBMCSecret = "emulated-bmc"
	// LabelEmulated marks the Hosts of emulated servers.
	LabelEmulated = "anvil.dev/emulated"
)

// EmulatedServersDir is the BMC emulator's state directory in anvil dev's stateDir: a
// folder per server (console.log, disks, the QEMU's socket and pid file).
func EmulatedServersDir(stateDir string) string {
	return filepath.Join(stateDir, "pools", MetalPoolName, "servers")
}

// EmulatedSpecs are amd emulated amd64 servers (emulated-1...: SeaBIOS) and arm arm64
// ones (emulated-arm64-1...: UEFI), each small enough for TCG, yet with the 2 GiB an OS
// booted from RAM needs (Debian's RAM form unpacks a root of about 1 GiB: docs/debian.md).
// Under TCG a guest's memory costs the host only what the guest touches.
func EmulatedSpecs(amd, arm int) []bmcemu.Spec {
	var specs []bmcemu.Spec
	for i := 1; i <= amd; i++ {
		specs = append(specs, bmcemu.Spec{Name: fmt.Sprintf("emulated-%d", i), CPUs: 2, MemoryMiB: 2048, DiskGiB: 8,
			MAC: fmt.Sprintf("52:54:00:e0:00:%02x", i), Architecture: computev1alpha1.ArchitectureAMD64})
	}
	for i := 1; i <= arm; i++ {
		specs = append(specs, bmcemu.Spec{Name: fmt.Sprintf("emulated-arm64-%d", i), CPUs: 2, MemoryMiB: 2048, DiskGiB: 8,
			MAC: fmt.Sprintf("52:54:00:e1:00:%02x", i), Architecture: computev1alpha1.ArchitectureARM64})
	}
	return specs
}

// startEmulatedServers runs the BMC emulator for specs on port (kept across restarts, as
// Hosts name it) and enrols each as a Host. The BMC's password is generated once and kept
// in a Secret. Each server's SSH is forwarded from a free loopback port, chosen at every
// start (a server still running from the last start keeps its own) and written on its Host
// (AnnotationSSHAddress), so its Machine reports it. The emulator stops when ctx ends; its
// servers keep running, as VMs do, and the next start adopts them with their media.
func startEmulatedServers(ctx context.Context, c client.Client, stateDir string, specs []bmcemu.Spec, port int, log logr.Logger) (*bmcemu.Emulator, error) {
	user, password, err := EmulatedCredentials(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range specs {
		if specs[i].SSHPort, err = vm.FreeLoopbackPort(); err != nil {
			return nil, fmt.Errorf("a port for %s's SSH: %w", specs[i].Name, err)
		}
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	e, err := bmcemu.Start(bmcemu.Config{StateDir: EmulatedServersDir(stateDir),
		Listen: listen, Username: user, Password: password, Servers: specs,
		Logger: log.WithName("bmc")})
	if err != nil {
		return nil, fmt.Errorf("the emulated servers' BMC (--bmc-port %d): %w", port, err)
	}
	go func() {
		<-ctx.Done()
		if err := e.Close(); err != nil {
			log.Error(err, "stopping the emulated servers' BMC")
		}
	}()
	return e, EnrolEmulatedServers(ctx, c, listen, specs, e.SSHPort)
}

// EnrolEmulatedServers creates a Host in MetalNamespace for each server of specs behind
// the BMC emulator serving on listen, with the credentials of EmulatedCredentials, labelled
// LabelEmulated. sshPort is the loopback port forwarded to a server's SSH (0: none), written
// on its Host; a Host created by an earlier start gets the port of this one.
func EnrolEmulatedServers(ctx context.Context, c client.Client, listen string, specs []bmcemu.Spec, sshPort func(name string) int) error {
	for _, s := range specs {
		h := &metalv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: MetalNamespace, Name: s.Name,
				Labels: map[string]string{"rack": "dev", LabelEmulated: "true"}},
			Spec: metalv1alpha1.HostSpec{
				BMC: metalv1alpha1.BMC{Address: bmcemu.Address(listen, s.Name),
					CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: emulatedBMCSecret}},
				BootMACAddress: s.MAC,
				Architecture:   s.Architecture,
				BootMode:       metalv1alpha1.BootMode(s.BootMode()),
			},
		}
		ssh := ""
		if port := sshPort(s.Name); port != 0 {
			ssh = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			h.Annotations = map[string]string{metalv1alpha1.AnnotationSSHAddress: ssh}
		}
		err := c.Create(ctx, h)
		if apierrors.IsAlreadyExists(err) && ssh != "" {
			// Started before: the port is new.
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, metalv1alpha1.AnnotationSSHAddress, ssh))
			err = c.Patch(ctx, h, client.RawPatch(types.MergePatchType, patch))
		}
		if err = client.IgnoreAlreadyExists(err); err != nil {
			return fmt.Errorf("creating Host %s: %w", s.Name, err)
		}
	}
	return nil
}

// EmulatedCredentials reads the emulated BMC's credentials from their Secret in
// MetalNamespace, generating them the first time.
func EmulatedCredentials(ctx context.Context, c client.Client) (user, password string, err error) {
	s := &corev1.Secret{}
	err = c.Get(ctx, client.ObjectKey{Namespace: MetalNamespace, Name: emulatedBMCSecret}, s)
	if err == nil {
		return string(s.Data["username"]), string(s.Data["password"]), nil
	}
	if !apierrors.IsNotFound(err) {
		return "", "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: MetalNamespace, Name: emulatedBMCSecret},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte(hex.EncodeToString(b))}}
	if err := c.Create(ctx, s); err != nil {
		return "", "", fmt.Errorf("creating Secret %s: %w", emulatedBMCSecret, err)
	}
	return "admin", hex.EncodeToString(b), nil
}
