package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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

// Attack: a tenant who builds an OS image reads its builder's push credential from the
// build's job Secret (in its own namespace) and uses it to push over another tenant's
// image or the builders' image, with its expiry pushed forward, its repository changed
// (and the password kept), after it expired, and to mount another repository's blob into
// its own. Each is refused; the credential pushes its own build's output.
func TestScopedPushCredentialWritesOnlyItsRepository(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	auth := &Auth{Push: Credential{Username: "anvil", Password: "push-secret"}, ScopeKey: key}
	reg, err := Start(context.Background(), 0, "", auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	ref := func(repo string) name.Reference {
		r, err := name.ParseReference(reg.Host+"/"+repo+":1", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	basic := func(c Credential) remote.Option {
		return remote.WithAuth(&authn.Basic{Username: c.Username, Password: c.Password})
	}
	// The victims' images, pushed by anvil.
	victim, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"team-b/os", "anvil/builder"} {
		if err := remote.Write(ref(repo), victim, basic(auth.Push)); err != nil {
			t.Fatal(err)
		}
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := ScopedPush(key, "team-a/os", time.Now().Add(time.Hour)) // from team-a's job Secret
	tampered := func(c Credential, user string) Credential { c.Username = user; return c }
	for _, tc := range []struct {
		what   string
		cred   Credential
		repo   string
		status int
	}{
		{"to another tenant's repository", found, "team-b/os", http.StatusForbidden},
		{"to the builders' image", found, "anvil/builder", http.StatusForbidden},
		{"to a repository below its own", found, "team-a/os/x", http.StatusForbidden},
		{"with its repository changed", tampered(found, strings.Replace(found.Username, "team-a", "team-b", 1)), "team-b/os", http.StatusUnauthorized},
		{"with its expiry pushed on", tampered(found, "scoped-push/99999999999/team-a/os"), "team-a/os", http.StatusUnauthorized},
		{"after it expired", ScopedPush(key, "team-a/os", time.Now().Add(-time.Second)), "team-a/os", http.StatusUnauthorized},
		{"minted with another key", ScopedPush([]byte("guessed"), "team-b/os", time.Now().Add(time.Hour)), "team-b/os", http.StatusUnauthorized},
	} {
		err := remote.Write(ref(tc.repo), img, basic(tc.cred))
		var te *transport.Error
		if !errors.As(err, &te) || te.StatusCode != tc.status {
			t.Errorf("push %s: %v, want HTTP %d", tc.what, err, tc.status)
		}
	}
	for _, repo := range []string{"team-b/os", "anvil/builder"} {
		got, err := remote.Head(ref(repo))
		if want, _ := victim.Digest(); err != nil || got.Digest != want {
			t.Errorf("%s is %v (%v), want the victim's %s", repo, got, err, want)
		}
	}
	// Deleting another's tag is a write too.
	if err := remote.Delete(ref("team-b/os"), basic(found)); err == nil {
		t.Error("the scoped credential deleted another tenant's tag")
	}

	// A cross-repository mount of another tenant's layer into its own repository.
	layers, err := victim.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"team-b/os", ""} {
		u := fmt.Sprintf("http://%s/v2/team-a/os/blobs/uploads/?mount=%s&from=%s", reg.Host, d, from)
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		req.SetBasicAuth(found.Username, found.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("mount from %q into its own repository: HTTP %d, want 403", from, resp.StatusCode)
		}
	}

	// Its own build's output: allowed, and readable by anyone.
	if err := remote.Write(ref("team-a/os"), img, basic(found)); err != nil {
		t.Fatalf("push to its own build's output: %v", err)
	}
	if _, err := remote.Image(ref("team-a/os")); err != nil {
		t.Fatalf("read the pushed image: %v", err)
	}
	// Its reads elsewhere (the base) are reads like anyone's.
	if _, err := remote.Image(ref("anvil/builder"), basic(found)); err != nil {
		t.Fatalf("read another repository with the scoped credential: %v", err)
	}
}

// A scoped credential names its repository and expiry, and only the key's HMAC of both
// makes it valid.
func TestScopedRepository(t *testing.T) {
	key := []byte("k")
	now := time.Unix(1_000_000, 0)
	c := ScopedPush(key, "team-a/os", now.Add(time.Minute))
	for _, tc := range []struct {
		what       string
		user, pass string
		key        []byte
		at         time.Time
		want       string
	}{
		{"valid", c.Username, c.Password, key, now, "team-a/os"},
		{"at its expiry", c.Username, c.Password, key, now.Add(time.Minute), ""},
		{"no key configured", c.Username, c.Password, nil, now, ""},
		{"other key", c.Username, c.Password, []byte("k2"), now, ""},
		{"password of another", "scoped-push/1000060/team-b/os", c.Password, key, now, ""},
		{"not scoped", "anvil", c.Password, key, now, ""},
		{"no repository", "scoped-push/1000060/", scopedPassword(key, "scoped-push/1000060/"), key, now, ""},
		{"no expiry", "scoped-push/team-a", scopedPassword(key, "scoped-push/team-a"), key, now, ""},
		{"bad expiry", "scoped-push/x/team-a", scopedPassword(key, "scoped-push/x/team-a"), key, now, ""},
	} {
		got, ok := scopedRepository(tc.key, tc.user, tc.pass, tc.at)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.what, got, ok, tc.want)
		}
	}
}
