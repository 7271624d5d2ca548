package imageref

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// pushIndex pushes a two-platform index to a fresh embedded registry and returns its tag
// reference and digest.
func pushIndex(t *testing.T) (ref string, digest v1.Hash, reg *registry.Registry) {
	t.Helper()
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	idx := v1.ImageIndex(empty.Index)
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	ref = reg.Host + "/anvil/testos:1"
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	digest, err = idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref, digest, reg
}

func TestDigestAndArchitecturesOfAnIndex(t *testing.T) {
	ref, digest, _ := pushIndex(t)
	r := &Registry{Transport: loopbackAllowed}
	got, err := r.Digest(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got != digest.String() {
		t.Fatalf("digest %s, want the index's %s", got, digest)
	}
	archs, err := r.Architectures(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(archs) != 2 || archs[0] != computev1alpha1.ArchitectureAMD64 || archs[1] != computev1alpha1.ArchitectureARM64 {
		t.Fatalf("architectures %v, want [amd64 arm64]", archs)
	}
}

func TestMissingImageIsAnError(t *testing.T) {
	ref, _, reg := pushIndex(t)
	_ = ref
	if _, err := (&Registry{Transport: loopbackAllowed}).Digest(context.Background(), reg.Host+"/anvil/absent:1"); err == nil {
		t.Fatal("a missing image resolved")
	}
}

// loopbackAllowed reaches the tests' registries, on loopback.
var loopbackAllowed = registrynet.Policy{Allow: registrynet.Loopback}.Transport()

// Without a Transport, a Registry holds to the address rules with nothing allow-listed:
// the references are tenants', and its readers (the manager, poollets) sit inside the site.
func TestDefaultRefusesNonPublicRegistries(t *testing.T) {
	ref, _, _ := pushIndex(t)
	_, err := (&Registry{}).Architectures(context.Background(), ref)
	var refused *registrynet.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("reading %s with the default transport: %v, want a refusal", ref, err)
	}
}

// What an image published with annotations (osimage.PushDirs, as anvil dev publishes the
// node image) says of itself is read back from its index, and from a single image's
// manifest; an image without any says nothing, never "unknown" (nil).
func TestAnnotationsOfAnIndexAndOfASingleImage(t *testing.T) {
	ref, _, reg := pushIndex(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, osimage.KernelFile), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	node := reg.Host + "/anvil/node:v1.36.3"
	says := map[string]string{computev1alpha1.ImageAnnotationKubernetesVersion: "v1.36.3"}
	if _, _, err := osimage.PushDirs(context.Background(), node, map[computev1alpha1.Architecture]string{"amd64": dir}, says); err != nil {
		t.Fatal(err)
	}
	single := reg.Host + "/anvil/single:1"
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.ParseReference(single, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, mutate.Annotations(img, says).(v1.Image)); err != nil {
		t.Fatal(err)
	}
	r := &Registry{Transport: loopbackAllowed}
	for image, want := range map[string]map[string]string{node: says, single: says, ref: {}} {
		got, err := r.Annotations(context.Background(), image)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || !maps.Equal(got, want) {
			t.Errorf("annotations of %s = %v, want %v", image, got, want)
		}
	}
}
