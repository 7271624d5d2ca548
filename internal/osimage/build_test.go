package osimage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func mustBuild(t testing.TB, f Files) v1.Image {
	t.Helper()
	img, err := Build(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func mustDigest(t testing.TB, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBuildAndIndexAreReproducible(t *testing.T) {
	amd := writeArtifacts(t, computev1alpha1.ArchitectureAMD64, 1000, 2000)
	arm := writeArtifacts(t, computev1alpha1.ArchitectureARM64, 1500, 2500)

	if a, b := mustDigest(t, mustBuild(t, amd)), mustDigest(t, mustBuild(t, amd)); a != b {
		t.Fatalf("two builds of the same files: %s and %s", a, b)
	}
	forward, err := Index(mustBuild(t, amd), mustBuild(t, arm))
	if err != nil {
		t.Fatal(err)
	}
	reversed, err := Index(mustBuild(t, arm), mustBuild(t, amd))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustDigest(t, forward), mustDigest(t, reversed); a != b {
		t.Fatalf("index digest depends on argument order: %s and %s", a, b)
	}

	m, err := reversed.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64" {
		t.Fatalf("index platforms %q, want sorted linux/amd64 linux/arm64", got)
	}

	// Changing one architecture's input changes the index.
	arm.KernelCommandLine += " quiet"
	changed, err := Index(mustBuild(t, amd), mustBuild(t, arm))
	if err != nil {
		t.Fatal(err)
	}
	if mustDigest(t, changed) == mustDigest(t, forward) {
		t.Fatal("a different kernel command line gave the same index digest")
	}
}

func TestBuildWritesTheAnvilFormat(t *testing.T) {
	f := writeArtifacts(t, computev1alpha1.ArchitectureARM64, 100, 200)
	f.Disk = filepath.Join(t.TempDir(), "disk.qcow2")
	// A version 3 qcow2 header naming no other file (CheckQCOW2 reads the header only).
	header := make([]byte, 112)
	copy(header, "QFI\xfb\x00\x00\x00\x03")
	if err := os.WriteFile(f.Disk, header, 0o644); err != nil {
		t.Fatal(err)
	}
	f.DiskFormat = DiskFormatQCOW2
	img := mustBuild(t, f)

	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != MediaTypeConfig {
		t.Errorf("config media type %q", m.Config.MediaType)
	}
	want := []string{string(MediaTypeKernel), string(MediaTypeInitramfs), string(MediaTypeDiskQCOW2)}
	var got []string
	for _, l := range m.Layers {
		got = append(got, string(l.MediaType))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("layers %v, want %v", got, want)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["architecture"] != "arm64" || cfg["os"] != "linux" || cfg["kernelCommandLine"] != f.KernelCommandLine {
		t.Errorf("config %s", raw)
	}
	// Generic OCI readers (imageref) see the architecture through the standard config.
	std, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if std.Architecture != "arm64" || std.OS != "linux" {
		t.Errorf("standard config view: %s/%s", std.OS, std.Architecture)
	}
}

func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	kernel := writeRandom(t, filepath.Join(dir, "kernel"), 64)
	initramfs := writeRandom(t, filepath.Join(dir, "initramfs"), 64)
	raw := writeRandom(t, filepath.Join(dir, "disk.raw"), 64)
	qcow2 := filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(qcow2, []byte("QFI\xfb\x00\x00\x00\x03"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	amd := computev1alpha1.ArchitectureAMD64
	for _, tc := range []struct {
		name string
		f    Files
		want string
	}{
		{"unknown architecture", Files{Architecture: "x86_64", Kernel: kernel}, `architecture "x86_64"`},
		{"nothing to boot", Files{Architecture: amd, Initramfs: initramfs}, "needs a kernel, a disk or both"},
		{"initramfs without kernel", Files{Architecture: amd, Initramfs: initramfs, Disk: raw, DiskFormat: DiskFormatRaw}, "needs a kernel"},
		{"two-line command line", Files{Architecture: amd, Kernel: kernel, KernelCommandLine: "a\nb"}, "one line"},
		{"missing kernel file", Files{Architecture: amd, Kernel: filepath.Join(dir, "nope")}, "no such file"},
		{"empty kernel", Files{Architecture: amd, Kernel: empty}, "is empty"},
		{"disk without format", Files{Architecture: amd, Disk: raw}, "disk format"},
		{"raw declared qcow2", Files{Architecture: amd, Disk: raw, DiskFormat: DiskFormatQCOW2}, "not a qcow2 file"},
		{"qcow2 declared raw", Files{Architecture: amd, Disk: qcow2, DiskFormat: DiskFormatRaw}, "is a qcow2 file"},
		{"folder as kernel", Files{Architecture: amd, Kernel: dir}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestIndexRefuses(t *testing.T) {
	amd := writeArtifacts(t, computev1alpha1.ArchitectureAMD64, 10, 0)
	other := writeArtifacts(t, computev1alpha1.ArchitectureAMD64, 20, 0)
	if _, err := Index(mustBuild(t, amd), mustBuild(t, other)); err == nil || !strings.Contains(err.Error(), "two images for architecture amd64") {
		t.Fatalf("duplicate architecture: %v", err)
	}
	foreign, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Index(mustBuild(t, amd), foreign); err == nil || !strings.Contains(err.Error(), "not an anvil OS image") {
		t.Fatalf("container image in an OS index: %v", err)
	}
	if _, err := Index(); err == nil {
		t.Fatal("an empty index was accepted")
	}
}
