package registry

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Attack: push into the registry (to replace an image others boot, or the builders'
// image) without its push credential: anonymously, with the read-only credential, with a
// guessed password. Each is refused; the push credential writes; anyone reads.
func TestOnlyThePushCredentialWrites(t *testing.T) {
	read := Credential{Username: "pool", Password: "read-secret"}
	auth := &Auth{Push: Credential{Username: "anvil", Password: "push-secret"}, Read: &read}
	reg, err := Start(context.Background(), 0, "", auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg.Host+"/anvil/builder:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	basic := func(c Credential) authn.Authenticator {
		return &authn.Basic{Username: c.Username, Password: c.Password}
	}
	for _, tc := range []struct {
		who    string
		auth   authn.Authenticator
		status int
	}{
		{"anonymous", authn.Anonymous, http.StatusUnauthorized},
		{"the read-only credential", basic(read), http.StatusForbidden},
		{"a guessed password", basic(Credential{Username: "anvil", Password: "anvil"}), http.StatusUnauthorized},
	} {
		err := remote.Write(ref, img, remote.WithAuth(tc.auth))
		var te *transport.Error
		if !errors.As(err, &te) || te.StatusCode != tc.status {
			t.Errorf("push by %s: %v, want HTTP %d", tc.who, err, tc.status)
		}
	}
	if _, err := remote.Head(ref, remote.WithAuth(authn.Anonymous)); err == nil {
		t.Fatal("a refused push left the tag")
	}
	if err := remote.Write(ref, img, remote.WithAuth(basic(auth.Push))); err != nil {
		t.Fatalf("push with the push credential: %v", err)
	}
	for _, a := range []authn.Authenticator{authn.Anonymous, basic(read)} {
		got, err := remote.Image(ref, remote.WithAuth(a))
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if _, err := got.RawManifest(); err != nil {
			t.Fatalf("read manifest: %v", err)
		}
		// Layers too: blob reads are GETs the middleware must let through.
		layers, _ := got.Layers()
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("read layer: %v", err)
			}
			rc.Close()
		}
	}
	// Deleting is a write too.
	if err := remote.Delete(ref, remote.WithAuth(basic(read))); err == nil {
		t.Error("the read-only credential deleted a tag")
	}
}
