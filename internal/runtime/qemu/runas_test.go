package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/testos"
)

// A guest that escapes into its QEMU must not be root on the host: the QEMU of a guest
// started by a root runtime runs as the unprivileged QEMU user, and the guest still boots.
func TestQEMUDropsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test checks what a root runtime does: run it as root (CI does)")
	}
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64))
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Hostname = "vm-unprivileged"
	spec.FirstBoot.Data = []byte("#cloud-config\n# anvil-marker=unprivileged\n")
	m := await(t, rt, create(t, rt, "unprivileged", spec).Metadata.Id, "ran", isRunning)
	awaitConsole(t, m.Status.Console, testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-unprivileged", "unprivileged"))

	status, err := os.ReadFile("/proc/" + pidOf(t, m) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if !strings.HasPrefix(line, "Uid:") && !strings.HasPrefix(line, "Gid:") {
			continue
		}
		for _, id := range strings.Fields(line)[1:] { // real, effective, saved, filesystem
			if id == "0" {
				t.Errorf("the guest's QEMU runs as root: %s", line)
			}
		}
	}
	checkSSHForward(t, m)
}

// A root runtime whose QEMU user is missing refuses to start, saying how to create the
// user, rather than run QEMU as root.
func TestMissingQEMUUserStopsTheRuntime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("run as root (CI does): a runtime that is not root has no user to drop to")
	}
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.QEMUUser = "anvil-no-such-user"
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "useradd --system") || !strings.Contains(err.Error(), "anvil-no-such-user") {
		t.Fatalf("New with a missing QEMU user = %v, want a refusal saying how to create it", err)
	}
	cfg.QEMUUser = "root"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "is root") {
		t.Fatalf("New with QEMU user root = %v, want a refusal", err)
	}
}

// An image disk plugged into a running VM is an overlay whose backing file is in the image
// cache, which QEMU's unprivileged user cannot open: the runtime hands it over too.
func TestPlugsAnImageDiskIntoAnUnprivilegedQEMU(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	img := pushRawImage(t, computev1alpha1.ArchitectureAMD64, map[types.MediaType]string{
		osimage.MediaTypeKernel:    filepath.Join(testos.Dir(t), "amd64", "kernel"),
		osimage.MediaTypeInitramfs: filepath.Join(testos.Dir(t), "amd64", "initramfs"),
		osimage.MediaTypeDiskQCOW2: disk,
	})
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64))
	m := await(t, rt, create(t, rt, "image-disk", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)).Metadata.Id, "ran", isRunning)
	vol := &mriv1alpha1.Volume{Name: "second", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}
	if _, err := rt.AttachVolume(context.Background(), &mriv1alpha1.AttachVolumeRequest{Id: m.Metadata.Id, Volume: vol}); err != nil {
		t.Fatal(err)
	}
	await(t, rt, m.Metadata.Id, "plugged the image disk", func(m *mriv1alpha1.Machine) bool {
		for _, a := range m.GetStatus().GetVolumes() {
			if a.Name == "second" && a.State == mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED {
				return true
			}
		}
		return false
	})
}
