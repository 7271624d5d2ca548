package osimage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// fuzzImages are the manifests, configs and index of a real two-architecture OS image, as
// a registry serves them: the fuzz tests' valid seeds.
func fuzzImages(f *testing.F) (manifests, configs [][]byte, index []byte) {
	f.Helper()
	dir := f.TempDir()
	var images []v1.Image
	for i, files := range []Files{
		{Architecture: amd64, KernelCommandLine: "console=ttyS0"},
		{Architecture: arm64, KernelCommandLine: "console=ttyAMA0 quiet"},
	} {
		files.Kernel = filepath.Join(dir, string(files.Architecture)+"-kernel")
		files.Initramfs = filepath.Join(dir, string(files.Architecture)+"-initramfs")
		for j, p := range []string{files.Kernel, files.Initramfs} {
			if err := os.WriteFile(p, []byte{byte(i), byte(j)}, 0o644); err != nil {
				f.Fatal(err)
			}
		}
		img, err := Build(files)
		if err != nil {
			f.Fatal(err)
		}
		m, err := img.RawManifest()
		if err != nil {
			f.Fatal(err)
		}
		c, err := img.RawConfigFile()
		if err != nil {
			f.Fatal(err)
		}
		manifests, configs, images = append(manifests, m), append(configs, c), append(images, img)
	}
	idx, err := Index(images...)
	if err != nil {
		f.Fatal(err)
	}
	if index, err = idx.RawManifest(); err != nil {
		f.Fatal(err)
	}
	return manifests, configs, index
}

// FuzzManifest reads any bytes as the manifest a registry returned for an OS image, the way
// Cache.Entry does: its kind, then as an index the entry of an architecture, or as an image
// manifest its layers. Nothing panics; what is refused wraps ErrNotOSImage or
// ErrWrongArchitecture where Entry promises it; and what is accepted is what the runtime
// relies on: an index entry of that linux architecture naming an image manifest, or an
// image manifest of anvil's config with one layer per role, each of a known size, and a
// kernel or a disk.
func FuzzManifest(f *testing.F) {
	manifests, _, index := fuzzImages(f)
	for _, raw := range append(manifests, index,
		[]byte(`{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`),
		[]byte(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","platform":{"os":"linux","architecture":"amd64"}}]}`),
		[]byte(`{"schemaVersion":2,"config":{},"layers":[]}`),
		[]byte(`{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}`),
		[]byte(`{"schemaVersion":2,"config":{"mediaType":"application/vnd.anvil.os.config.v1+json"},"layers":[{"mediaType":"application/vnd.anvil.os.kernel.v1","size":-1}]}`),
		[]byte(`{"mediaType":"text/plain"}`), []byte(`{}`), []byte(`not json`),
	) {
		f.Add(raw, "amd64")
		f.Add(raw, "arm64")
	}
	f.Fuzz(func(t *testing.T, raw []byte, arch string) {
		kind, err := manifestKind(raw)
		if err != nil {
			return // Entry wraps this one in ErrNotOSImage itself
		}
		if !kind.IsIndex() && !kind.IsImage() {
			t.Fatalf("manifestKind accepted media type %q, neither an index nor an image", kind)
		}
		if kind.IsIndex() {
			idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
			if err != nil {
				return
			}
			d, err := entryFor(idx, computev1alpha1.Architecture(arch))
			if err != nil {
				if errors.Is(err, ErrWrongArchitecture) && offers(idx, arch) {
					t.Fatalf("entryFor(%s) says the index has no entry for it, but it has one: %v", arch, err)
				}
				return
			}
			if d.Platform == nil || d.Platform.OS != OS || d.Platform.Architecture != arch || !d.MediaType.IsImage() {
				t.Fatalf("entryFor(%s) chose %+v: not a %s/%s image manifest", arch, d, OS, arch)
			}
			return
		}
		m, err := checkManifest(raw)
		if err != nil {
			if !errors.Is(err, ErrNotOSImage) {
				t.Fatalf("checkManifest refused without ErrNotOSImage: %v", err)
			}
			return
		}
		if m.Config.MediaType != MediaTypeConfig {
			t.Fatalf("accepted a manifest whose config is a %q", m.Config.MediaType)
		}
		seen, kernel, disk := map[string]bool{}, false, false
		for _, l := range m.Layers {
			switch l.MediaType {
			case MediaTypeKernel:
				kernel = true
			case MediaTypeDiskRaw, MediaTypeDiskQCOW2:
				if disk {
					t.Fatalf("accepted two disk layers")
				}
				disk = true
			case MediaTypeInitramfs:
			default:
				t.Fatalf("accepted a layer of media type %q", l.MediaType)
			}
			if seen[string(l.MediaType)] || l.Size < 0 {
				t.Fatalf("accepted layer %+v: a second of its kind, or a negative size", l)
			}
			seen[string(l.MediaType)] = true
		}
		if !kernel && !disk {
			t.Fatalf("accepted an image with neither a kernel nor a disk: %s", raw)
		}
	})
}

// offers reports whether idx has an entry for linux/arch.
func offers(idx *v1.IndexManifest, arch string) bool {
	for _, d := range idx.Manifests {
		if d.Platform != nil && d.Platform.OS == OS && d.Platform.Architecture == arch {
			return true
		}
	}
	return false
}

// FuzzConfig reads any bytes as an OS image's config blob. What is refused wraps
// ErrNotOSImage; what is accepted names a known architecture, linux, and a kernel command
// line of one line without NUL, as Build writes it: the runtimes hand it to QEMU's -append
// and to Ironic's boot configuration, where a line break would start another directive.
func FuzzConfig(f *testing.F) {
	_, configs, _ := fuzzImages(f)
	for _, raw := range append(configs,
		[]byte(`{"architecture":"riscv64","os":"linux"}`),
		[]byte(`{"architecture":"x86_64","os":"linux"}`),
		[]byte(`{"architecture":"amd64","os":"windows"}`),
		[]byte(`[]`), []byte(`null`),
	) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := parseConfig(raw)
		if err != nil {
			if !errors.Is(err, ErrNotOSImage) {
				t.Fatalf("parseConfig refused without ErrNotOSImage: %v", err)
			}
			return
		}
		if !cfg.Architecture.IsKnown() || cfg.OS != OS {
			t.Fatalf("accepted architecture %q, os %q", cfg.Architecture, cfg.OS)
		}
		if strings.ContainsAny(cfg.KernelCommandLine, "\r\n\x00") {
			t.Fatalf("accepted kernel command line %q: it is not one line of text", cfg.KernelCommandLine)
		}
	})
}

// FuzzParseReference parses any text as an image reference. It names what go-containerregistry
// reads, and plain HTTP is spoken only to a registry the reference really names on loopback
// (or that go-containerregistry itself would speak it to): never, say, to Docker Hub for a
// reference "localhost" that has no registry part.
func FuzzParseReference(f *testing.F) {
	for _, ref := range []string{
		"127.0.0.1:5000/anvil/testos:1", "localhost:5000/a", "localhost/a", "[::1]:5000/a", "127.0.0.2/a",
		"registry.example.com/a:1", "ghcr.io/anvil/testos@sha256:" + strings.Repeat("0", 64), "anvil/testos",
	} {
		f.Add(ref)
	}
	f.Fuzz(func(t *testing.T, reference string) {
		ref, err := ParseReference(reference)
		if err != nil {
			return
		}
		plain, err := name.ParseReference(reference)
		if err != nil {
			t.Fatalf("ParseReference accepted %q, which go-containerregistry refuses: %v", reference, err)
		}
		if ref.Name() != plain.Name() {
			t.Fatalf("ParseReference(%q) names %s, go-containerregistry %s", reference, ref.Name(), plain.Name())
		}
		registry := ref.Context().RegistryStr()
		if ref.Context().Scheme() == "http" && plain.Context().Scheme() != "http" && !onLoopback(registry) {
			t.Fatalf("ParseReference(%q) speaks plain HTTP to %s, which is not on loopback", reference, registry)
		}
	})
}

// onLoopback reports whether a registry's host is localhost or a loopback address.
func onLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.IsLoopback()
}

// FuzzCheckQCOW2 checks any bytes as a qcow2 disk's header. A disk it accepts must be one
// QEMU opens without reading any other file: qemu-img itself names no backing file for
// it and opens no external data file.
func FuzzCheckQCOW2(f *testing.F) {
	qemuImgPath, err := exec.LookPath("qemu-img")
	if err != nil {
		f.Fatal("qemu-img is missing: run make deps (qemu-utils)")
	}
	dir := f.TempDir()
	for _, args := range [][]string{nil, {"-o", "compat=0.10"}, {"-b", "/etc/hostname", "-F", "raw"}, {"-o", "data_file=" + filepath.Join(dir, "data.raw")}} {
		path := filepath.Join(dir, "seed.qcow2")
		if out, err := exec.Command(qemuImgPath, append(append([]string{"create", "-q", "-f", "qcow2"}, args...), path, "1M")...).CombinedOutput(); err != nil {
			f.Fatalf("qemu-img create %v: %v: %s", args, err, out)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw[:min(len(raw), 4096)])
	}
	withFlag := make([]byte, qcow2HeaderV3Length)
	copy(withFlag, qcow2Magic)
	binary.BigEndian.PutUint32(withFlag[qcow2VersionAt:], 3)
	binary.BigEndian.PutUint64(withFlag[qcow2IncompatibleAt:], qcow2ExternalDataFile)
	f.Add(withFlag)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, header []byte) {
		if CheckQCOW2(bytes.NewReader(header)) != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "disk.qcow2")
		if err := os.WriteFile(path, header, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(qemuImgPath, "info", "-U", "--output=json", "-f", "qcow2", path).Output()
		if err != nil {
			return // QEMU refuses to open it at all: no file of the host is read either
		}
		var info map[string]any
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("qemu-img info: %v: %s", err, out)
		}
		if info["backing-filename"] != nil || info["full-backing-filename"] != nil {
			t.Fatalf("accepted a disk whose backing file qemu-img reads as %v", info["backing-filename"])
		}
		// "data-file" repeats the name in the header's extension even when QEMU ignores it
		// (the incompatible bit is what opens it); "data-file-raw" is there only when QEMU
		// opened an external data file.
		if spec, _ := info["format-specific"].(map[string]any); spec != nil {
			if data, _ := spec["data"].(map[string]any); data != nil && data["data-file-raw"] != nil {
				t.Fatalf("accepted a disk for which qemu-img opened the external data file %v", data["data-file"])
			}
		}
	})
}
