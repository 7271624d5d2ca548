package debian

import (
	"os"
	"path/filepath"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/testos"
)

// serverClass is one whole server: counting anvil.dev/hosts keeps it on bare-metal pools.
const serverClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: debian-server}
capabilities: {cpu: "1", memory: 1Gi, anvil.dev/hosts: "1"}
`

// serverMachine is a Debian Machine on an emulated server of ARCH in anvil dev's metal
// pool, with the user data in its Secret and one metaData key.
const serverMachine = `
apiVersion: v1
kind: Secret
metadata: {name: debian-server-ARCH-user-data, namespace: default}
stringData:
  userData: |
USERDATA
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: debian-server-ARCH, namespace: default}
spec:
  machineClassRef: {name: debian-server}
  architecture: ARCH
  image: IMAGE
  hostname: debian-server-ARCH
  metaData: {anvil-test: value-ARCH}
  userDataRef: {name: debian-server-ARCH-user-data}
  machinePoolSelector: {compute.anvil.dev/runtime: metal}
  hostSelector:
    matchLabels: {anvil.dev/emulated: "true"}
`

// testServers: on an emulated server of each architecture, Ironic's ramdisk deploy boots
// the RAM form from virtual media with the Machine's config drive on the BMC's USB stick,
// and Debian's cloud-init applies it from its ConfigDrive datasource. The tests log in
// through the SSH address the Machine reports (the emulated server's loopback forward,
// from its Host) and ask the OS what its first boot did, as on the QEMU pools.
func testServers(t *testing.T, d *debianDev) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, server := range []string{"emulated-1", "emulated-arm64-1"} {
			b, _ := os.ReadFile(filepath.Join(d.state, "pools", "dev-metal", "servers", server, "console.log"))
			t.Logf("the end of %s's console:\n%s", server, devproc.LastLines(string(b), 60))
		}
	})
	logins := map[computev1alpha1.Architecture]*guestssh.Identity{}
	for _, arch := range testos.Architectures {
		logins[arch] = createMachine(t, d.kubeconfig, serverMachine, arch, d.ram)
	}
	for _, arch := range testos.Architectures {
		name := "debian-server-" + string(arch)
		c := env.Login(t, d.kubeconfig, name, logins[arch])
		checkFirstBoot(t, name, arch, c, serverDatasource)
		c.Close()
	}
}
