package images

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// hack/images push sends every index to a registry that takes writes only with its push
// credential, read from the docker config DOCKER_CONFIG names (as anvil dev's), and the
// registry serves each back by digest and by its version tag. Without the credential the
// push is refused.
func TestPush(t *testing.T) {
	out := layouts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	push := registry.Credential{Username: "anvil-push", Password: "test-password"}
	reg, err := registry.Start(ctx, 0, t.TempDir(), &registry.Auth{Push: push})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Stop(); err != nil {
			t.Error(err)
		}
	}()
	args := []string{"push", "-out", out, "-registry", reg.Host + "/anvil"}
	if refused, err := runEnv(".", []string{"DOCKER_CONFIG=" + t.TempDir()}, buildTool, args...); err == nil {
		t.Fatalf("a push without the credential succeeded:\n%s", refused)
	}
	docker := t.TempDir()
	if err := registrynet.WriteLogins(filepath.Join(docker, "config.json"), registrynet.Login{Username: push.Username, Password: push.Password}, reg.Host); err != nil {
		t.Fatal(err)
	}
	pushed, err := runEnv(".", []string{"DOCKER_CONFIG=" + docker}, buildTool, args...)
	if err != nil {
		t.Fatalf("hack/images push: %v\n%s", err, pushed)
	}
	for _, name := range names {
		idx, _ := images(t, name)
		want, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"@" + want.String(), ":" + m.Annotations["org.opencontainers.image.version"]} {
			ref, err := osimage.ParseReference(reg.Host + "/anvil/" + name + r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := remote.Index(ref, remote.WithContext(ctx))
			if err != nil {
				t.Fatalf("%s: %v (push said: %s)", ref, err, strings.TrimSpace(string(pushed)))
			}
			if d, err := got.Digest(); err != nil || d != want {
				t.Errorf("%s is %s (%v), want %s", ref, d, err, want)
			}
			// Every blob of every platform is there, not just the index.
			for _, e := range m.Manifests {
				img, err := got.Image(e.Digest)
				if err != nil {
					t.Fatal(err)
				}
				layers, err := img.Layers()
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range layers {
					// Opening a blob asks the registry for it; its content was checked by digest on upload.
					rc, err := l.Compressed()
					if err != nil {
						t.Errorf("%s %s: %v", name, e.Platform, err)
						continue
					}
					rc.Close()
				}
			}
		}
	}
}
