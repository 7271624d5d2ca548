package qemu

import (
	"net"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/test/testos"
)

// Each architecture boots its own entry of one image, reads its own first-boot config
// (cloud-init on amd64, Ignition on arm64), powers off on the power button and boots again.
func TestBootsEachArchitectureWithItsOwnConfig(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64))

	amd := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	amd.Hostname = "vm-amd"
	amd.FirstBoot.Data = []byte("#cloud-config\n# anvil-marker=amd64-value\n")
	arm := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_ARM64)
	arm.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION, Data: []byte(
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[` +
			`{"path":"/etc/hostname","contents":{"source":"data:,vm-arm"}},` +
			`{"path":"/etc/anvil","contents":{"source":"data:,anvil-marker=arm64-value"}}]}}`)}

	machines := map[string]string{
		create(t, rt, "amd", amd).Metadata.Id: testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-amd", "amd64-value"),
		create(t, rt, "arm", arm).Metadata.Id: testos.ReadyLine(computev1alpha1.ArchitectureARM64, "vm-arm", "arm64-value"),
	}
	for id, line := range machines {
		m := await(t, rt, id, "ran", isRunning)
		awaitConsole(t, m.Status.Console, line)
		checkSSHForward(t, m)
	}
	for id := range machines {
		start := time.Now()
		power(t, rt, id, mriv1alpha1.Power_POWER_OFF)
		m := await(t, rt, id, "shut down", isShutdown)
		// The guest powered itself off on the button: the kernel says so on its console.
		awaitConsole(t, m.Status.Console, "reboot: Power down")
		t.Logf("%s powered off in %s", id, time.Since(start).Round(time.Millisecond))
	}
	for id, line := range machines {
		power(t, rt, id, mriv1alpha1.Power_POWER_ON)
		m := await(t, rt, id, "ran again", isRunning)
		awaitConsoleCount(t, m.Status.Console, line, 2) // the console log keeps every boot
	}
}

// checkSSHForward checks the machine reports its guest address and an SSH port on the
// host's loopback that QEMU listens on.
func checkSSHForward(t *testing.T, m *mriv1alpha1.Machine) {
	t.Helper()
	var ssh, internal string
	for _, a := range m.Status.Addresses {
		switch a.Type {
		case "SSH":
			ssh = a.Address
		case "InternalIP":
			internal = a.Address
		}
	}
	if internal != "10.0.2.15" || !strings.HasPrefix(ssh, "127.0.0.1:") {
		t.Fatalf("addresses %v: want InternalIP 10.0.2.15 and SSH on 127.0.0.1", m.Status.Addresses)
	}
	c, err := net.DialTimeout("tcp", ssh, 5*time.Second)
	if err != nil {
		t.Fatalf("SSH forward %s: %v", ssh, err)
	}
	c.Close()
}
