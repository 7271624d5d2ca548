package osimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

var (
	amd64 = computev1alpha1.ArchitectureAMD64
	arm64 = computev1alpha1.ArchitectureARM64
)

// pushTwoArch pushes an amd64+arm64 index (the arm64 image with a raw disk) to host and
// returns its files, tag reference and digest.
func pushTwoArch(t testing.TB, host string) (map[computev1alpha1.Architecture]Files, string, string) {
	t.Helper()
	amd := writeArtifacts(t, amd64, 3000, 5000)
	arm := writeArtifacts(t, arm64, 4000, 6000)
	arm.Disk = writeRandom(t, filepath.Join(t.TempDir(), "disk.raw"), 7000)
	arm.DiskFormat = DiskFormatRaw
	idx, err := Index(mustBuild(t, amd), mustBuild(t, arm))
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/anvil/testos:1"
	digest, err := Push(context.Background(), ref, idx)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustDigest(t, idx).String(); digest != want {
		t.Fatalf("Push returned %s, the index is %s", digest, want)
	}
	return map[computev1alpha1.Architecture]Files{amd64: amd, arm64: arm}, ref, digest
}

func newCache(t testing.TB) (*Cache, string) {
	t.Helper()
	dir := t.TempDir()
	c, err := NewCache(dir, loopbackOnly)
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

func sameBytes(t *testing.T, what, got, want string) {
	t.Helper()
	if want == "" {
		if got != "" {
			t.Errorf("%s: got %s, want none", what, got)
		}
		return
	}
	g, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s: pulled bytes differ from the pushed file", what)
	}
}

func TestPushThenPullEachArchitecture(t *testing.T) {
	reg := startRegistry(t)
	pushed, ref, digest := pushTwoArch(t, reg.Host)
	c, dir := newCache(t)
	for _, arch := range []computev1alpha1.Architecture{amd64, arm64} {
		got, err := c.Pull(context.Background(), ref, digest, arch)
		if err != nil {
			t.Fatalf("pull %s: %v", arch, err)
		}
		want := pushed[arch]
		if got.Architecture != arch || got.KernelCommandLine != want.KernelCommandLine || got.DiskFormat != want.DiskFormat {
			t.Errorf("%s: got %+v", arch, got)
		}
		sameBytes(t, string(arch)+" kernel", got.Kernel, want.Kernel)
		sameBytes(t, string(arch)+" initramfs", got.Initramfs, want.Initramfs)
		sameBytes(t, string(arch)+" disk", got.Disk, want.Disk)
		for _, p := range []string{got.Kernel, got.Initramfs, got.Disk} {
			if p != "" && filepath.Dir(p) != filepath.Join(dir, "blobs", "sha256") {
				t.Errorf("%s lies outside the cache's blob folder", p)
			}
		}
	}
}

func TestPullByTagAndByDigestReference(t *testing.T) {
	reg := startRegistry(t)
	pushed, ref, digest := pushTwoArch(t, reg.Host)
	c, _ := newCache(t)
	byTag, err := c.Pull(context.Background(), ref, "", amd64)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "kernel by tag", byTag.Kernel, pushed[amd64].Kernel)
	pinned := reg.Host + "/anvil/testos@" + digest
	if _, err := c.Pull(context.Background(), pinned, "", arm64); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(context.Background(), pinned, "sha256:"+strings.Repeat("0", 64), arm64); err == nil {
		t.Fatal("a reference and a digest that disagree were accepted")
	}
}

func TestPullWrongArchitecture(t *testing.T) {
	reg := startRegistry(t)
	c, _ := newCache(t)

	amdOnly, err := Index(mustBuild(t, writeArtifacts(t, amd64, 100, 0)))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := Push(context.Background(), reg.Host+"/anvil/amd64-only:1", amdOnly)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Pull(context.Background(), reg.Host+"/anvil/amd64-only:1", digest, arm64)
	if !errors.Is(err, ErrWrongArchitecture) || !strings.Contains(err.Error(), "linux/amd64") {
		t.Fatalf("arm64 from an amd64-only index: %v", err)
	}

	// A single image (no index) is checked through its config.
	single := mustBuild(t, writeArtifacts(t, amd64, 100, 0))
	tag, err := name.ParseReference(reg.Host+"/anvil/single:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, single); err != nil {
		t.Fatal(err)
	}
	_, err = c.Pull(context.Background(), tag.String(), mustDigest(t, single).String(), arm64)
	if !errors.Is(err, ErrWrongArchitecture) {
		t.Fatalf("arm64 from a single amd64 image: %v", err)
	}
	got, err := c.Pull(context.Background(), tag.String(), mustDigest(t, single).String(), amd64)
	if err != nil || got.Kernel == "" {
		t.Fatalf("amd64 from a single amd64 image: %+v, %v", got, err)
	}
}

func TestPullMissingImage(t *testing.T) {
	reg := startRegistry(t)
	_, ref, _ := pushTwoArch(t, reg.Host)
	c, _ := newCache(t)
	absent := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct{ ref, digest string }{
		{ref, absent},                           // repository exists, digest does not
		{reg.Host + "/anvil/nothing:1", absent}, // no such repository
		{reg.Host + "/anvil/testos:nope", ""},   // no such tag
	} {
		_, err := c.Pull(context.Background(), tc.ref, tc.digest, amd64)
		if !errors.Is(err, ErrImageNotFound) {
			t.Errorf("pull %s %s: %v, want ErrImageNotFound", tc.ref, tc.digest, err)
		}
	}
}

func TestPullRefusesAContainerImage(t *testing.T) {
	reg := startRegistry(t)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.ParseReference(reg.Host+"/library/app:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	c, _ := newCache(t)
	_, err = c.Pull(context.Background(), tag.String(), mustDigest(t, img).String(), amd64)
	if err == nil || !strings.Contains(err.Error(), "not an anvil OS image") {
		t.Fatalf("container image: %v", err)
	}
}

func TestConcurrentPullsFetchEachBlobOnce(t *testing.T) {
	reg := startRegistry(t)
	_, _, digest := pushTwoArch(t, reg.Host)
	p := startProxy(t, reg.Host)
	ref := p.Host + "/anvil/testos:1"
	c, _ := newCache(t)

	const pullers = 8
	var wg sync.WaitGroup
	errs := make([]error, pullers)
	files := make([]Files, pullers)
	for i := range pullers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			files[i], errs[i] = c.Pull(context.Background(), ref, digest, arm64)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("puller %d: %v", i, err)
		}
		if !reflect.DeepEqual(files[i], files[0]) {
			t.Fatalf("puller %d got %+v, puller 0 %+v", i, files[i], files[0])
		}
	}
	// Index, arm64 manifest, config, kernel, initramfs, disk: each fetched exactly once.
	var fetches int
	for path, n := range p.snapshot() {
		if strings.Contains(path, "/manifests/") || strings.Contains(path, "/blobs/") {
			fetches++
			if n != 1 {
				t.Errorf("GET %s %d times, want once", path, n)
			}
		}
	}
	if fetches != 6 {
		t.Errorf("%d distinct manifests and blobs fetched, want 6: %v", fetches, p.snapshot())
	}

	// A warm pull by digest needs no registry at all.
	p.reset()
	if _, err := c.Pull(context.Background(), ref, digest, arm64); err != nil {
		t.Fatal(err)
	}
	if got := p.snapshot(); len(got) != 0 {
		t.Errorf("warm pull made requests: %v", got)
	}
}

func TestCorruptedBlobIsRefused(t *testing.T) {
	reg := startRegistry(t)
	_, ref, digest := pushTwoArch(t, reg.Host)
	p := startProxy(t, reg.Host)
	c, dir := newCache(t)

	// Learn the amd64 kernel's digest with a clean pull into another cache.
	clean, _ := newCache(t)
	f, err := clean.Pull(context.Background(), ref, digest, amd64)
	if err != nil {
		t.Fatal(err)
	}
	kernelDigest := "sha256:" + filepath.Base(f.Kernel)

	p.mu.Lock()
	p.corrupt = kernelDigest
	p.mu.Unlock()
	_, err = c.Pull(context.Background(), p.Host+"/anvil/testos:1", digest, amd64)
	if err == nil {
		t.Fatal("a corrupted kernel was accepted")
	}
	t.Logf("corrupted kernel: %v", err)
	if p.count("/blobs/"+kernelDigest) == 0 {
		t.Fatal("the kernel was never fetched through the corrupting proxy")
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", "sha256", filepath.Base(f.Kernel))); !os.IsNotExist(err) {
		t.Fatalf("corrupted kernel is in the cache: %v", err)
	}
	assertNoTempFiles(t, dir)

	// The same cache recovers once the registry sends the right bytes.
	p.mu.Lock()
	p.corrupt = ""
	p.mu.Unlock()
	if _, err := c.Pull(context.Background(), p.Host+"/anvil/testos:1", digest, amd64); err != nil {
		t.Fatal(err)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}
