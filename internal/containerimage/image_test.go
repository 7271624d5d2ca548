package containerimage

import (
	"context"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
)

var src = Source{URL: "https://example.org/anvil", Revision: "abc", Version: "v1", Created: epoch}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  Source
		want map[string]string
	}{
		{"all", src, map[string]string{LabelSource: src.URL, LabelRevision: "abc", LabelVersion: "v1", LabelTitle: "t",
			LabelCreated: "2023-11-14T22:13:20Z"}},
		{"empty values left out", Source{Revision: "abc"}, map[string]string{LabelRevision: "abc", LabelTitle: "t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.src.Labels("t")
			if len(got) != len(tc.want) {
				t.Fatalf("labels %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// testIndex builds a two-architecture index in dir, the images given in order.
func testIndex(t *testing.T, dir string, order []string) v1.ImageIndex {
	t.Helper()
	role := Role{Title: "anvil", Entrypoint: []string{"/anvil"}, User: "65532:65532"}
	imgs := map[string]v1.Image{}
	for _, arch := range order {
		l, err := WriteLayer(dir, Layer{Entries: []Entry{File("anvil", 0o755, []byte("binary for "+arch))}}, src)
		must(t, err)
		img, err := Image(ConfigFile(role, arch, src), []v1.Layer{l}, []string{"anvil"})
		must(t, err)
		imgs[arch] = img
	}
	idx, err := Index(imgs, src.Labels("anvil"))
	must(t, err)
	return idx
}

func TestIndex(t *testing.T) {
	a := testIndex(t, t.TempDir(), []string{"arm64", "amd64"})
	b := testIndex(t, t.TempDir(), []string{"amd64", "arm64"})
	da, err := a.Digest()
	must(t, err)
	db, err := b.Digest()
	must(t, err)
	if da != db {
		t.Fatalf("the same images gave indexes %s and %s", da, db)
	}
	m, err := a.IndexManifest()
	must(t, err)
	if m.MediaType != types.OCIImageIndex || m.Annotations[LabelRevision] != "abc" {
		t.Errorf("index media type %s, annotations %v", m.MediaType, m.Annotations)
	}
	if len(m.Manifests) != 2 || m.Manifests[0].Platform.Architecture != "amd64" || m.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("manifests %+v, want amd64 then arm64", m.Manifests)
	}
	img, err := a.Image(m.Manifests[1].Digest)
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	if cfg.Architecture != "arm64" || cfg.Config.User != "65532:65532" || cfg.Config.Labels[LabelVersion] != "v1" ||
		!cfg.Created.Time.Equal(epoch) || len(cfg.History) != 1 || !cfg.History[0].Created.Time.Equal(epoch) {
		t.Errorf("config %+v", cfg)
	}
	mf, err := img.Manifest()
	must(t, err)
	if mf.MediaType != types.OCIManifestSchema1 || mf.Config.MediaType != types.OCIConfigJSON || mf.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest media types %s %s %s", mf.MediaType, mf.Config.MediaType, mf.Layers[0].MediaType)
	}
}

func TestIndexRefusesAWrongArchitecture(t *testing.T) {
	img, err := Image(ConfigFile(Role{}, "arm64", src), nil, nil)
	must(t, err)
	if _, err := Index(map[string]v1.Image{"amd64": img}, nil); err == nil {
		t.Fatal("an arm64 image was accepted as amd64")
	}
}

// A layout written and read back, and pushed to a registry and read back by digest, is
// the same index.
func TestLayoutAndPush(t *testing.T) {
	dir := t.TempDir()
	idx := testIndex(t, t.TempDir(), []string{"amd64", "arm64"})
	want, err := idx.Digest()
	must(t, err)
	must(t, WriteLayout(dir+"/layout", idx, "v1"))
	read, err := ReadLayout(dir + "/layout")
	must(t, err)
	if got, _ := read.Digest(); got != want {
		t.Fatalf("layout holds %s, want %s", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, err := registry.Start(ctx, 0, "", nil)
	must(t, err)
	defer func() { must(t, reg.Stop()) }()
	must(t, Push(ctx, read, reg.Host+"/anvil/anvil:v1"))
	ref, err := osimage.ParseReference(reg.Host + "/anvil/anvil@" + want.String())
	must(t, err)
	pulled, err := remote.Index(ref, remote.WithContext(ctx))
	must(t, err)
	if got, _ := pulled.Digest(); got != want {
		t.Fatalf("registry holds %s, want %s", got, want)
	}
}
