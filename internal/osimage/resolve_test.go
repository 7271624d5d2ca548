package osimage

import (
	"errors"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func layer(mt types.MediaType) v1.Descriptor { return v1.Descriptor{MediaType: mt, Size: 1} }

func TestLayerRoles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers []v1.Descriptor
		want   string // "" means accepted
	}{
		{"kernel", []v1.Descriptor{layer(MediaTypeKernel)}, ""},
		{"kernel initramfs disk", []v1.Descriptor{layer(MediaTypeKernel), layer(MediaTypeInitramfs), layer(MediaTypeDiskRaw)}, ""},
		{"disk only", []v1.Descriptor{layer(MediaTypeDiskQCOW2)}, ""},
		{"nothing", nil, "neither a kernel nor a disk"},
		{"initramfs only", []v1.Descriptor{layer(MediaTypeInitramfs), layer(MediaTypeDiskRaw)}, "no kernel"},
		{"tar layer", []v1.Descriptor{layer(MediaTypeKernel), layer(types.OCILayer)}, "do not use"},
		{"two kernels", []v1.Descriptor{layer(MediaTypeKernel), layer(MediaTypeKernel)}, "a second"},
		{"two disks", []v1.Descriptor{layer(MediaTypeDiskRaw), layer(MediaTypeDiskQCOW2)}, "a second"},
		{"negative size", []v1.Descriptor{{MediaType: MediaTypeKernel, Size: -1}}, "negative size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := layerRoles(tc.layers)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEntryFor(t *testing.T) {
	entry := func(os, arch string, mt types.MediaType) v1.Descriptor {
		return v1.Descriptor{MediaType: mt, Platform: &v1.Platform{OS: os, Architecture: arch}}
	}
	idx := &v1.IndexManifest{Manifests: []v1.Descriptor{
		entry("linux", "arm64", types.OCIManifestSchema1),
		{MediaType: types.OCIManifestSchema1}, // no platform: never chosen
		entry("windows", "amd64", types.OCIManifestSchema1),
		entry("linux", "s390x", types.OCIImageIndex),
	}}
	if d, err := entryFor(idx, arm64); err != nil || d.Platform.Architecture != "arm64" {
		t.Fatalf("arm64: %v, %v", d, err)
	}
	_, err := entryFor(idx, amd64)
	if !errors.Is(err, ErrWrongArchitecture) || !strings.Contains(err.Error(), "[linux/arm64 linux/s390x windows/amd64]") {
		t.Fatalf("amd64: %v", err)
	}
	if _, err := entryFor(idx, "s390x"); err == nil || errors.Is(err, ErrWrongArchitecture) {
		t.Fatalf("nested index entry: %v", err)
	}
}

func TestManifestKind(t *testing.T) {
	for raw, want := range map[string]types.MediaType{
		`{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`: types.OCIImageIndex,
		`{"schemaVersion":2,"manifests":[]}`:                                     types.OCIImageIndex,
		`{"schemaVersion":2,"config":{},"layers":[]}`:                            types.OCIManifestSchema1,
		`{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}`:   types.DockerManifestSchema2,
	} {
		if got, err := manifestKind([]byte(raw)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{`{"mediaType":"text/plain"}`, `{}`, `not json`} {
		if _, err := manifestKind([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", raw)
		}
	}
}

// Plain HTTP goes to the registries a reference names on loopback, and to no other: a
// reference without a registry part is Docker Hub's, whatever it looks like.
func TestParseReferencePlainHTTPOnlyOnLoopback(t *testing.T) {
	for ref, want := range map[string]bool{
		"127.0.0.1:5000/anvil/testos:1": true,
		"localhost:5000/a":              true,
		"localhost/a":                   true,
		"[::1]:5000/a":                  true,
		"127.0.0.2/a":                   true,
		"registry.example.com/a:1":      false,
		"ghcr.io/anvil/testos@sha256:" + strings.Repeat("0", 64): false,
		"anvil/testos":   false,
		"localhost":      false,
		"127.0.0.1:5000": false,
		"localhost:5000": false,
	} {
		r, err := ParseReference(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if got := r.Context().Scheme() == "http"; got != want {
			t.Errorf("ParseReference(%q) speaks plain HTTP to %s: %v, want %v", ref, r.Context().RegistryStr(), got, want)
		}
	}
}
