package images

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
)

// qemuProbe starts a machine as the qemu runtime does (-nodefaults, TCG, a virtio NIC and
// RNG) but paused, then quits over QMP: QEMU finds its firmware, option ROMs and libraries.
func qemuProbe(binary, machine string) []string {
	return []string{binary, "-machine", machine, "-accel", "tcg", "-nodefaults", "-no-user-config", "-display", "none",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci", "-S", "-qmp", "stdio"}
}

const qmpQuit = `{"execute":"qmp_capabilities"}` + "\n" + `{"execute":"quit"}` + "\n"

// The qemu runtime's image: the amd64 one runs its QEMUs and qemu-img, the arm64 one holds
// arm64 builds of them.
func TestQEMUImage(t *testing.T) {
	_, imgs := images(t, "anvil-qemu")
	root := unpack(t, imgs["amd64"])
	version := inRoot(t, root, "", "/anvil", "version")
	mustContain(t, "qemu-system-x86_64 --version", inRoot(t, root, "", "qemu-system-x86_64", "--version"), "QEMU emulator version")
	mustContain(t, "qemu-system-aarch64 --version", inRoot(t, root, "", "qemu-system-aarch64", "--version"), "QEMU emulator version")
	mustContain(t, "qemu-img --version", inRoot(t, root, "", "qemu-img", "--version"), "qemu-img version")
	mustContain(t, "a paused q35 machine", inRoot(t, root, qmpQuit, qemuProbe("qemu-system-x86_64", "q35")...), `"return"`)
	mustContain(t, "a paused virt machine", inRoot(t, root, qmpQuit, append(qemuProbe("qemu-system-aarch64", "virt"), "-cpu", "cortex-a57")...), `"return"`)
	t.Logf("anvil version in the image: %s", strings.TrimSpace(version))

	for _, p := range []string{"usr/bin/qemu-system-x86_64", "usr/bin/qemu-system-aarch64", "usr/bin/qemu-img"} {
		checkELF(t, p, "arm64", readFile(t, imgs["arm64"], p), false)
	}
}

// ironicConf is enough configuration for ironic-dbsync to make Ironic's schema in SQLite.
const ironicConf = "[DEFAULT]\nauth_strategy = noauth\n[database]\nconnection = sqlite:////tmp/ironic.sqlite\n"

// The bare-metal site's image: the amd64 one runs Ironic's and ironic-inspector's commands
// (Python and the modules the site uses import), makes Ironic's database, and holds what
// Ironic's boot ISOs need and anvil's eraser and EFI system partition; the arm64 one holds
// an arm64 Python and the same files.
func TestMetalImage(t *testing.T) {
	_, imgs := images(t, "anvil-metal")
	root := unpack(t, imgs["amd64"])
	mustContain(t, "ironic --version", inRoot(t, root, "", "ironic", "--version"), ".")
	mustContain(t, "ironic-inspector --version", inRoot(t, root, "", "ironic-inspector", "--version"), ".")
	mustContain(t, "ironic-dbsync --help", inRoot(t, root, "", "ironic-dbsync", "--help"), "create_schema")
	// One process each: Ironic and ironic-inspector register options of the same names.
	inRoot(t, root, "", "python3", "-c", "import ironic.conductor.manager, ironic.drivers.redfish, ironic.drivers.ipmi, sushy")
	inRoot(t, root, "", "python3", "-c", "import ironic_inspector.main, ironic_inspector.conductor.manager")
	if err := os.WriteFile(filepath.Join(root, "tmp/ironic.conf"), []byte(ironicConf), 0o644); err != nil {
		t.Fatal(err)
	}
	inRoot(t, root, "", "ironic-dbsync", "--config-file", "/tmp/ironic.conf", "create_schema")
	mustContain(t, "genisoimage --version", inRoot(t, root, "", "genisoimage", "--version"), "genisoimage")

	bin := os.Getenv("KUBEBUILDER_ASSETS")
	if bin == "" {
		r, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(r, "bin")
	}
	same := map[string]string{"usr/share/anvil/esp.img": "esp.img"}
	for _, arch := range archs {
		for _, f := range []string{"kernel", "initramfs", "cmdline"} {
			same["usr/share/anvil/eraser/"+arch+"/"+f] = "eraser/" + arch + "/" + f
		}
	}
	for arch, img := range imgs {
		for inImage, inBin := range same {
			want, err := os.ReadFile(filepath.Join(bin, inBin))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, img, inImage), want) {
				t.Errorf("%s: /%s is not bin/%s", arch, inImage, inBin)
			}
		}
		for _, f := range []string{"usr/lib/ISOLINUX/isolinux.bin", "usr/lib/syslinux/modules/bios/ldlinux.c32", "usr/bin/ironic", "usr/bin/ironic-inspector"} {
			readFile(t, img, f)
		}
		mustContain(t, arch+" /usr/share/anvil/VERSIONS", string(readFile(t, img, "usr/share/anvil/VERSIONS")), arch+" ironic-conductor ")
	}
	checkELF(t, "python3.11", "arm64", readFile(t, imgs["arm64"], "usr/bin/python3.11"), false)
}

var archs = []string{"amd64", "arm64"}
