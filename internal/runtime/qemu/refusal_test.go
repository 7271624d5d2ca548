package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/test/testos"
)

func createErr(rt *Runtime, uid string, spec *mriv1alpha1.MachineSpec) error {
	_, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid}}, Spec: spec}})
	return err
}

func wantRefusal(t *testing.T, what string, err error, code codes.Code, reason mriv1alpha1.ErrorReason) {
	t.Helper()
	if status.Code(err) != code || mri.ReasonOf(err) != reason {
		t.Errorf("%s: %v, want %s/%s", what, err, code, reason)
	}
}

// The image's own refusals come back from CreateMachine itself, so the caller can place
// the machine elsewhere.
func TestCreateRefusesImagesItCannotBoot(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64) // amd64 only
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	rt := newRuntime(t, cfg)

	err := createErr(rt, "arm-on-amd64-image", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_ARM64))
	wantRefusal(t, "arm64 machine of an amd64-only image", err, codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE)

	missing := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	missing.Image.Digest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	wantRefusal(t, "unknown digest", createErr(rt, "missing", missing), codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND)

	riscv := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_RISCV64)
	wantRefusal(t, "architecture the pool does not run", createErr(rt, "riscv", riscv), codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE)

	if list, _ := rt.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{}); len(list.Machines) != 0 {
		t.Fatalf("refused creates left machines: %v", list.Machines)
	}

	// A registry that does not answer is no refusal: the pull retries and says why.
	away := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	away.Image.Reference = "127.0.0.1:1/anvil/testos:test"
	m := create(t, rt, "away", away)
	m = await(t, rt, m.Metadata.Id, "reported the failed pull", func(m *mriv1alpha1.Machine) bool {
		for _, c := range m.GetStatus().GetConditions() {
			if c.Type == CondImagePulled && !c.Status && c.Reason == "PullFailed" {
				return true
			}
		}
		return false
	})
	if m.Status.State != mriv1alpha1.MachineState_MACHINE_STATE_PENDING {
		t.Errorf("state %s while the image cannot be pulled, want Pending", m.Status.State)
	}
	remove(t, rt, m.Metadata.Id)
	await(t, rt, m.Metadata.Id, "went away", gone)
}

// Admission: the machines not Terminated never add up to more than allocatable, which is
// the host's resources times the overcommit ratios.
func TestCapacityAdmission(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	cfg.CPUOvercommit = 0.5
	rt := newRuntime(t, cfg)
	st, err := rt.Status(context.Background(), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem, _ := hostResources()
	if st.Allocatable.MilliCpu != cpu/2 || st.Allocatable.MemoryBytes != mem-mem%(1<<30) {
		t.Fatalf("allocatable %v, want half the host's %dm cpu and its %d bytes in whole GiB", st.Allocatable, cpu, mem)
	}
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Power = mriv1alpha1.Power_POWER_OFF // admission needs no guest
	spec.Resources.MilliCpu = st.Allocatable.MilliCpu / 2
	create(t, rt, "first", spec)
	create(t, rt, "second", spec)
	wantRefusal(t, "a third half", createErr(rt, "third", spec), codes.ResourceExhausted, mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY)
}

// The attack: a tenant pushes, with any OCI tool, an image whose qcow2 disk names a host
// file as its backing file, hoping to boot with that file as its disk. The runtime refuses
// the image (UnsafeImage) and never starts QEMU for it.
func TestRefusesADiskThatNamesAHostFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "host-secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", secret, "-F", "raw", disk).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	img := pushRawImage(t, computev1alpha1.ArchitectureAMD64, map[types.MediaType]string{
		osimage.MediaTypeKernel:    filepath.Join(testos.Dir(t), "amd64", "kernel"),
		osimage.MediaTypeInitramfs: filepath.Join(testos.Dir(t), "amd64", "initramfs"),
		osimage.MediaTypeDiskQCOW2: disk,
	})
	cfg := testConfig(t, computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, cfg)
	m := create(t, rt, "backed", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64))
	m = await(t, rt, m.Metadata.Id, "refused the image", func(m *mriv1alpha1.Machine) bool {
		for _, c := range m.GetStatus().GetConditions() {
			if c.Type == CondImagePulled && !c.Status && c.Reason == "UnsafeImage" {
				return true
			}
		}
		return false
	})
	if m.Status.State != mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED {
		t.Errorf("state %s, want Terminated", m.Status.State)
	}
	if pids := qemusUnder(cfg.StateDir); len(pids) != 0 {
		t.Errorf("QEMU runs for the refused image: %v", pids)
	}
	remove(t, rt, m.Metadata.Id)
	await(t, rt, m.Metadata.Id, "went away", gone)
}

// pushRawImage pushes an OS image of the given layers as a generic OCI client would,
// without anvil's own checks, and returns it.
func pushRawImage(t *testing.T, arch computev1alpha1.Architecture, layers map[types.MediaType]string) testImage {
	t.Helper()
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{Architecture: string(arch), OS: osimage.OS})
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range []types.MediaType{osimage.MediaTypeKernel, osimage.MediaTypeInitramfs, osimage.MediaTypeDiskRaw, osimage.MediaTypeDiskQCOW2} {
		path, ok := layers[mt]
		if !ok {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, static.NewLayer(b, mt)); err != nil {
			t.Fatal(err)
		}
	}
	img = mutate.ConfigMediaType(img, osimage.MediaTypeConfig)
	ref := reg.Host + "/tenant/hostile:1"
	digest, err := osimage.PushImage(context.Background(), ref, img)
	if err != nil {
		t.Fatal(err)
	}
	return testImage{Reference: ref, Digest: digest}
}

// An image whose config is not an anvil OS image's (here: no architecture) cannot become
// one by pulling again: the machine fails with NotOSImage instead of retrying forever.
func TestRefusesAnImageThatIsNotAnOSImage(t *testing.T) {
	img := pushRawImage(t, "", map[types.MediaType]string{
		osimage.MediaTypeKernel: filepath.Join(testos.Dir(t), "amd64", "kernel"),
	})
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64))
	m := create(t, rt, "not-os", machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64))
	await(t, rt, m.Metadata.Id, "failed with NotOSImage", func(m *mriv1alpha1.Machine) bool {
		for _, c := range m.GetStatus().GetConditions() {
			if c.Type == CondImagePulled && !c.Status && c.Reason == "NotOSImage" {
				return m.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED
			}
		}
		return false
	})
	remove(t, rt, m.Metadata.Id)
	await(t, rt, m.Metadata.Id, "went away", gone)
}
