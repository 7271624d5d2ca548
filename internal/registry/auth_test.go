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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Attack: push into the registry (to replace an image others boot, or the builders'
// image) without its push credential: anonymously, with the read-only credential, with a
// guessed password. Each is refused; the push credential writes; the read-only credential
// and the push credential read, and nobody anonymously.
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
	var te *transport.Error
	if _, err := remote.Image(ref, remote.WithAuth(authn.Anonymous)); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous read of a registry with a read credential: %v, want HTTP 401", err)
	}
	for _, a := range []authn.Authenticator{basic(auth.Push), basic(read)} {
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
	found := ScopedPush(key, "team-a/os", []string{"anvil/builder"}, time.Now().Add(time.Hour)) // from team-a's job Secret
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
		{"to a repository it may read", found, "anvil/builder", http.StatusForbidden},
		{"with a repository added to what it reads", tampered(found, found.Username+"+team-b/os"), "team-a/os", http.StatusUnauthorized},
		{"with its repository changed", tampered(found, strings.Replace(found.Username, "team-a", "team-b", 1)), "team-b/os", http.StatusUnauthorized},
		{"with its expiry pushed on", tampered(found, "scoped-push/99999999999/team-a/os"), "team-a/os", http.StatusUnauthorized},
		{"after it expired", ScopedPush(key, "team-a/os", nil, time.Now().Add(-time.Second)), "team-a/os", http.StatusUnauthorized},
		{"minted with another key", ScopedPush([]byte("guessed"), "team-b/os", nil, time.Now().Add(time.Hour)), "team-b/os", http.StatusUnauthorized},
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
	// Mounts into its own repository: from another tenant's and from nowhere refused, from
	// the base it reads allowed.
	for _, tc := range []struct {
		from string
		want int
	}{{"team-b/os", http.StatusForbidden}, {"", http.StatusForbidden}, {"anvil/builder", http.StatusCreated}} {
		u := fmt.Sprintf("http://%s/v2/team-a/os/blobs/uploads/?mount=%s&from=%s", reg.Host, d, tc.from)
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		req.SetBasicAuth(found.Username, found.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("mount from %q into its own repository: HTTP %d, want %d", tc.from, resp.StatusCode, tc.want)
		}
	}

	// Its own build's output: allowed, and readable by anyone.
	if err := remote.Write(ref("team-a/os"), img, basic(found)); err != nil {
		t.Fatalf("push to its own build's output: %v", err)
	}
	if _, err := remote.Image(ref("team-a/os")); err != nil {
		t.Fatalf("read the pushed image: %v", err)
	}
	// What a builder pushes beside its image: its build log, an artifact whose subject is
	// the image (the client asks the referrers API, then falls back to the referrers tag).
	pushed, err := remote.Head(ref("team-a/os"), basic(found))
	if err != nil {
		t.Fatal(err)
	}
	logImg := mutate.Subject(img, v1.Descriptor{MediaType: pushed.MediaType, Digest: pushed.Digest, Size: pushed.Size}).(v1.Image)
	if err := remote.Write(ref("team-a/os"), logImg, basic(found)); err != nil {
		t.Fatalf("push an artifact about its own image: %v", err)
	}
	// It reads what it names (its build's base).
	if _, err := remote.Image(ref("anvil/builder"), basic(found)); err != nil {
		t.Fatalf("read its base with the scoped credential: %v", err)
	}
}

// Attack: with the pools' read credential configured, read another tenant's image: with no
// credential, with a build's scoped credential (from the tenant's own job Secret), and list
// the catalog to find what there is. Each is refused; the credential reads what it names
// and the pools' credential reads everything.
func TestReadingNeedsACredential(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	read := Credential{Username: "pool", Password: "read-secret"}
	auth := &Auth{Push: Credential{Username: "anvil", Password: "push-secret"}, Read: &read, ScopeKey: key}
	reg, err := Start(context.Background(), 0, "", auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	basic := func(c Credential) authn.Authenticator {
		return &authn.Basic{Username: c.Username, Password: c.Password}
	}
	for _, repo := range []string{"team-a/os", "team-b/os", "anvil/testos"} {
		r, _ := name.ParseReference(reg.Host+"/"+repo+":1", name.Insecure)
		if err := remote.Write(r, img, remote.WithAuth(basic(auth.Push))); err != nil {
			t.Fatal(err)
		}
	}
	found := ScopedPush(key, "team-a/os", []string{"anvil/testos"}, time.Now().Add(time.Hour))
	get := func(path string, a authn.Authenticator) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+reg.Host+path, nil)
		if b, ok := a.(*authn.Basic); ok {
			req.SetBasicAuth(b.Username, b.Password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		what, path string
		auth       authn.Authenticator
		status     int
	}{
		{"another tenant's manifest, anonymously", "/v2/team-b/os/manifests/1", authn.Anonymous, http.StatusUnauthorized},
		{"its own manifest, anonymously", "/v2/team-a/os/manifests/1", authn.Anonymous, http.StatusUnauthorized},
		{"the catalog, anonymously", "/v2/_catalog", authn.Anonymous, http.StatusUnauthorized},
		{"another tenant's manifest, with a build's credential", "/v2/team-b/os/manifests/1", basic(found), http.StatusForbidden},
		{"another tenant's tags, with a build's credential", "/v2/team-b/os/tags/list", basic(found), http.StatusForbidden},
		{"the catalog, with a build's credential", "/v2/_catalog", basic(found), http.StatusForbidden},
		{"its own manifest, with its build's credential", "/v2/team-a/os/manifests/1", basic(found), http.StatusOK},
		{"its own referrers, with its build's credential (distribution has no referrers API)", "/v2/team-a/os/referrers/sha256:" + strings.Repeat("0", 64), basic(found), http.StatusNotFound},
		{"another tenant's referrers, with a build's credential", "/v2/team-b/os/referrers/sha256:" + strings.Repeat("0", 64), basic(found), http.StatusForbidden},
		{"its base, with its build's credential", "/v2/anvil/testos/manifests/1", basic(found), http.StatusOK},
		{"the version check, with its build's credential", "/v2/", basic(found), http.StatusOK},
		{"a tenant's manifest, with the pools' credential", "/v2/team-b/os/manifests/1", basic(read), http.StatusOK},
		{"the catalog, with the pools' credential", "/v2/_catalog", basic(read), http.StatusOK},
	} {
		if got := get(tc.path, tc.auth); got != tc.status {
			t.Errorf("read %s: HTTP %d, want %d", tc.what, got, tc.status)
		}
	}
}

// A scoped credential names its repositories and expiry, and only the key's HMAC of them
// makes it valid.
func TestScopeOf(t *testing.T) {
	key := []byte("k")
	now := time.Unix(1_000_000, 0)
	c := ScopedPush(key, "team-a/os", []string{"anvil/testos"}, now.Add(time.Minute))
	signed := func(user string) (string, string) { return user, scopedPassword(key, user) }
	for _, tc := range []struct {
		what       string
		user, pass string
		key        []byte
		at         time.Time
		want       *Scope
	}{
		{"valid", c.Username, c.Password, key, now, &Scope{Push: "team-a/os", Reads: []string{"anvil/testos"}}},
		{"at its expiry", c.Username, c.Password, key, now.Add(time.Minute), nil},
		{"no key configured", c.Username, c.Password, nil, now, nil},
		{"other key", c.Username, c.Password, []byte("k2"), now, nil},
		{"password of another", "scoped-push/1000060/team-b/os", c.Password, key, now, nil},
		{"a read added, password kept", c.Username + "+team-b/os", c.Password, key, now, nil},
		{"not scoped", "anvil", c.Password, key, now, nil},
		{"no reads", c.Username[:strings.Index(c.Username, "+")], scopedPassword(key, c.Username[:strings.Index(c.Username, "+")]), key, now, &Scope{Push: "team-a/os", Reads: []string{}}},
	} {
		got, ok := scopeOf(tc.key, tc.user, tc.pass, tc.at)
		if ok != (tc.want != nil) || (ok && (got.Push != tc.want.Push || strings.Join(got.Reads, ",") != strings.Join(tc.want.Reads, ","))) {
			t.Errorf("%s: %+v %v, want %+v", tc.what, got, ok, tc.want)
		}
	}
	for _, user := range []string{"scoped-push/1000060/", "scoped-push/team-a", "scoped-push/x/team-a", "scoped-push/1000060/team-a/os+", "scoped-push/1000060/+anvil/testos"} {
		u, p := signed(user)
		if got, ok := scopeOf(key, u, p, now); ok {
			t.Errorf("malformed %q, signed: %+v, want refused", user, got)
		}
	}
}

// Attack: with a public folder (anvil/kube, what kubeadm nodes pull without a credential),
// read beyond it without a credential: a repository whose name only starts like the
// folder, the folder's name as a repository, a path that climbs out of it, the catalog;
// another tenant's blob or manifest by digest through a public repository; and write into
// it, anonymously or with a build's scoped credential. Each is refused; the folder's own
// repositories are read by anyone, a scoped credential included.
func TestPublicFoldersAreReadByAnyoneAndWrittenByNoOneElse(t *testing.T) {
	read := Credential{Username: "pool", Password: "read-secret"}
	auth := &Auth{Push: Credential{Username: "anvil", Password: "push-secret"}, Read: &read, Public: []string{"anvil/kube"},
		ScopeKey: []byte("0123456789abcdef0123456789abcdef")}
	reg, err := Start(context.Background(), 0, "", auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	push := &authn.Basic{Username: auth.Push.Username, Password: auth.Push.Password}
	for _, repo := range []string{"anvil/kube/kube-apiserver", "anvil/kubernetes", "anvil/kube"} {
		r, _ := name.ParseReference(reg.Host+"/"+repo+":1", name.Insecure)
		if err := remote.Write(r, img, remote.WithAuth(push)); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant's image has blobs of its own, which no public repository holds.
	tenantImg, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := name.ParseReference(reg.Host+"/team-b/os:1", name.Insecure)
	if err := remote.Write(tr, tenantImg, remote.WithAuth(push)); err != nil {
		t.Fatal(err)
	}
	layers, _ := tenantImg.Layers()
	ld, _ := layers[0].Digest()
	md, _ := tenantImg.Digest()
	tenantLayer, tenantManifest := ld.String(), md.String()
	for _, tc := range []struct {
		what, path string
		status     int
	}{
		{"a public manifest", "/v2/anvil/kube/kube-apiserver/manifests/1", http.StatusOK},
		{"a public repository's tags", "/v2/anvil/kube/kube-apiserver/tags/list", http.StatusOK},
		{"a repository named like the folder", "/v2/anvil/kubernetes/manifests/1", http.StatusUnauthorized},
		{"the folder's name as a repository", "/v2/anvil/kube/manifests/1", http.StatusUnauthorized},
		{"a tenant's manifest through a path out of the folder", "/v2/anvil/kube/../../team-b/os/manifests/1", http.StatusUnauthorized},
		{"a tenant's referrers through a path out of the folder", "/v2/anvil/kube/a/../../../team-b/os/referrers/sha256:" + strings.Repeat("0", 64), http.StatusUnauthorized},
		{"a tenant's blob through a public repository", "/v2/anvil/kube/kube-apiserver/blobs/" + tenantLayer, http.StatusNotFound},
		{"a tenant's manifest through a public repository", "/v2/anvil/kube/kube-apiserver/manifests/" + tenantManifest, http.StatusNotFound},
		{"a tenant's manifest", "/v2/team-b/os/manifests/1", http.StatusUnauthorized},
		{"the catalog", "/v2/_catalog", http.StatusUnauthorized},
	} {
		resp, err := http.Get("http://" + reg.Host + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("anonymous read of %s: HTTP %d, want %d", tc.what, resp.StatusCode, tc.status)
		}
	}
	r, _ := name.ParseReference(reg.Host+"/anvil/kube/kube-apiserver:1", name.Insecure)
	other, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	var te *transport.Error
	if err := remote.Write(r, other, remote.WithAuth(authn.Anonymous)); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous push into the public folder: %v, want HTTP 401", err)
	}
	// A build's scoped credential reads the public folder but never writes into it, even
	// when the scope names a repository there.
	sc := ScopedPush(auth.ScopeKey, "anvil/kube/kube-apiserver", nil, time.Now().Add(time.Hour))
	scoped := authn.Basic{Username: sc.Username, Password: sc.Password}
	if _, err := remote.Head(r, remote.WithAuth(&scoped)); err != nil {
		t.Errorf("a scoped credential reading the public folder: %v", err)
	}
	if err := remote.Write(r, other, remote.WithAuth(&scoped)); !errors.As(err, &te) || te.StatusCode != http.StatusForbidden {
		t.Errorf("a scoped push into the public folder: %v, want HTTP 403", err)
	}
	got, err := remote.Image(r, remote.WithAuth(authn.Anonymous))
	if err != nil {
		t.Fatalf("anonymous pull of a public image: %v", err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("the public image is %s after the refused push, want %s", d, want)
	}
}

// A referrers path names its repository only when no segment climbs or is empty:
// distribution does not route these requests, so nothing cleans them before the check.
func TestReferrersRepository(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		path, repository string
		ok               bool
	}{
		{"/v2/team-a/os/referrers/" + digest, "team-a/os", true},
		{"/v2/anvil/kube/a/../../../team-b/os/referrers/" + digest, "", false},
		{"/v2/anvil/kube/./x/referrers/" + digest, "", false},
		{"/v2/anvil//kube/referrers/" + digest, "", false},
		{"/v2/referrers/" + digest, "", false},
		{"/v2/team-a/os/referrers/" + digest + "/x", "", false},
		{"/v3/team-a/os/referrers/" + digest, "", false},
	} {
		repository, ok := referrersRepository(tc.path)
		if repository != tc.repository || ok != tc.ok {
			t.Errorf("referrersRepository(%q) = %q, %v; want %q, %v", tc.path, repository, ok, tc.repository, tc.ok)
		}
	}
}
