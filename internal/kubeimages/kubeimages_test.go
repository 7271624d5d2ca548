package kubeimages

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/internal/registry"
)

// build writes, into a new folder, one layout per name:tag (a random index each) and the
// DIGESTS a finished build writes last.
func build(t *testing.T, tagged ...string) string {
	t.Helper()
	dir := t.TempDir()
	var digests []string
	for _, nt := range tagged {
		n, tag, _ := strings.Cut(nt, ":")
		idx, err := random.Index(128, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := containerimage.WriteLayout(filepath.Join(dir, n), idx, tag); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		digests = append(digests, nt+" "+d.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "DIGESTS"), []byte(strings.Join(digests, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// What a finished build holds reaches the registry under every repository kubeadm asks
// for (CoreDNS under registry.k8s.io's path too), each the index DIGESTS names.
func TestPushPublishesEveryRepositoryKubeadmAsksFor(t *testing.T) {
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	dir := build(t, "kube-apiserver:v1.36.3", "coredns:v1.14.2", "pause:3.10.2")
	pushed, err := Push(context.Background(), dir, reg.Host+"/anvil/kube/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kube-apiserver:v1.36.3", "coredns:v1.14.2", "coredns/coredns:v1.14.2", "pause:3.10.2"}
	if !slices.Equal(pushed, want) {
		t.Errorf("pushed %v, want %v", pushed, want)
	}
	images, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	digest := map[string]string{}
	for _, im := range images {
		digest[im.Name] = im.Digest
	}
	for _, ref := range want {
		r, err := name.ParseReference(reg.Host+"/anvil/kube/"+ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		d, err := remote.Head(r, remote.WithAuth(authn.Anonymous))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		image, _, _ := strings.Cut(strings.TrimPrefix(ref, "coredns/"), ":")
		if d.Digest.String() != digest[image] {
			t.Errorf("%s is %s, want %s", ref, d.Digest, digest[image])
		}
	}
}

// A folder whose build did not finish (no DIGESTS, or a layout that is not the index DIGESTS
// names: a later build stopped half way) is refused before anything is pushed; so is a
// DIGESTS that is not NAME:TAG DIGEST lines.
func TestPushRefusesAnUnfinishedBuild(t *testing.T) {
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })

	noDigests := build(t, "pause:3.10.2")
	if err := os.Remove(filepath.Join(noDigests, "DIGESTS")); err != nil {
		t.Fatal(err)
	}
	stale := build(t, "etcd:3.6.16-0", "pause:3.10.2")
	other, err := random.Index(128, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := containerimage.WriteLayout(filepath.Join(stale, "pause"), other, "3.10.2"); err != nil {
		t.Fatal(err)
	}
	for what, dir := range map[string]string{"no DIGESTS": noDigests, "a layout DIGESTS does not name": stale} {
		if pushed, err := Push(context.Background(), dir, reg.Host+"/anvil/kube"); err == nil || len(pushed) != 0 {
			t.Errorf("%s: pushed %v (%v), want a refusal and nothing pushed", what, pushed, err)
		}
	}
	// The stale build's first image, whose layout is sound, did not reach the registry.
	r, _ := name.ParseReference(reg.Host+"/anvil/kube/etcd:3.6.16-0", name.Insecure)
	if _, err := remote.Head(r, remote.WithAuth(authn.Anonymous)); err == nil {
		t.Error("a refused build's sound image was pushed")
	}
	for _, bad := range []string{"", "pause 3.10.2 sha256:x\n", "pause:3.10.2\n", "anvil/pause:1 sha256:x\n", ":1 sha256:x\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "DIGESTS"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if images, err := Read(dir); err == nil {
			t.Errorf("DIGESTS %q read as %v, want an error", bad, images)
		}
	}
}
