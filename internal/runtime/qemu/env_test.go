package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/testos"
)

// testImage is the test OS pushed as a two-architecture image to an embedded registry.
type testImage struct {
	Reference, Digest string
}

func pushTestOS(t testing.TB, archs ...computev1alpha1.Architecture) testImage {
	t.Helper()
	return pushTestOSVariant(t, "", archs...)
}

// pushTestOSVariant pushes the test OS with anvil.variant=variant on its kernel command
// line (none when ""): the same OS under another digest, which a guest can tell apart by
// reading /proc/cmdline.
func pushTestOSVariant(t testing.TB, variant string, archs ...computev1alpha1.Architecture) testImage {
	t.Helper()
	dir := testos.Dir(t)
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	var images []v1.Image
	for _, a := range archs {
		cmdline, err := os.ReadFile(filepath.Join(dir, string(a), "cmdline"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := osimage.Build(osimage.Files{
			Architecture: a, Kernel: filepath.Join(dir, string(a), "kernel"), Initramfs: filepath.Join(dir, string(a), "initramfs"),
			KernelCommandLine: strings.TrimSpace(string(cmdline)) + variantArg(variant),
		})
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	idx, err := osimage.Index(images...)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/anvil/testos:test"
	digest, err := osimage.Push(context.Background(), ref, idx)
	if err != nil {
		t.Fatal(err)
	}
	return testImage{Reference: ref, Digest: digest}
}

func variantArg(variant string) string {
	if variant == "" {
		return ""
	}
	return " anvil.variant=" + variant
}

// testConfig is a runtime on fresh state and cache folders.
func testConfig(t testing.TB, archs ...computev1alpha1.Architecture) Config {
	t.Helper()
	// Not t.TempDir(): long test names would push QMP socket paths past Linux's limit.
	root, err := os.MkdirTemp("", "anvil-qemu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	cache, err := osimage.NewCache(filepath.Join(root, "cache"), osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name: "qemu", StateDir: filepath.Join(root, "state"), Architectures: archs,
		PowerOffGrace: 10 * time.Second,
		Images:        cache, Index: &imageref.Registry{Transport: registrynet.Policy{Allow: registrynet.Loopback}.Transport()}, Seeds: nocloud.WriteISO,
		Logger: testr.NewWithInterface(t, testr.Options{Verbosity: 1}),
	}
	t.Cleanup(func() { killQEMUsUnder(t, cfg.StateDir) })
	return cfg
}

// killQEMUsUnder kills, by pid, every QEMU whose QMP socket is inside dir: the test's own.
func killQEMUsUnder(t testing.TB, dir string) {
	for _, pid := range qemusUnder(dir) {
		t.Logf("killing QEMU %d left by the test", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// qemusUnder lists live QEMU processes whose command line names a path inside dir.
func qemusUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(filepath.Base(strings.SplitN(string(raw), "\x00", 2)[0]), "qemu-system-") {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		if strings.Contains(string(raw), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// machineSpec is a small machine of the test OS.
func machineSpec(img testImage, arch mriv1alpha1.Architecture) *mriv1alpha1.MachineSpec {
	return &mriv1alpha1.MachineSpec{
		Class:             "small",
		Resources:         &mriv1alpha1.Resources{MilliCpu: 1000, MemoryBytes: 256 << 20},
		Image:             &mriv1alpha1.Image{Reference: img.Reference, Digest: img.Digest},
		Architecture:      arch,
		Power:             mriv1alpha1.Power_POWER_ON,
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{SizeBytes: 64 << 20}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0", Network: "default"}},
		FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT,
			Data: []byte("#cloud-config\nanvil-marker=conformance\n")},
	}
}
