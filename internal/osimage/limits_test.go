package osimage

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/registrynet/registrynettest"
)

// pullWithin pulls with no deadline of its own (as the runtime does) and fails the test if
// the pull is still running after limit.
func pullWithin(t *testing.T, c *Cache, reference string, limit time.Duration) (Files, error) {
	t.Helper()
	type result struct {
		files Files
		err   error
	}
	done := make(chan result, 1)
	go func() {
		f, err := c.Pull(context.Background(), reference, "", amd64)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.files, r.err
	case <-time.After(limit):
		t.Fatalf("pull of %s still running after %s", reference, limit)
		return Files{}, nil
	}
}

// Attack: an image on a registry that accepts the connection and then never answers,
// to hold the runtime's pull (and its goroutine and connection) forever.
func TestSilentRegistryFailsThePull(t *testing.T) {
	reg := registrynettest.StartSilent(t)
	c, err := NewCache(t.TempDir(), CacheOptions{Network: registrynet.Policy{Timeout: time.Second, Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pullWithin(t, c, reg.Host+"/anvil/testos:1", 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("pull from a silent registry: %v, want a timeout", err)
	}
	if reg.Accepted.Load() == 0 {
		t.Fatal("the pull never reached the silent registry")
	}
	// The connections are closed by the client, not left waiting.
	deadline := time.Now().Add(5 * time.Second)
	for reg.Open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := reg.Open.Load(); n > 0 {
		t.Fatalf("%d connections to the silent registry still open", n)
	}
}

// stallingProxy passes requests to a registry, except that the body of a blob GET stops
// after its first bytes and then never ends (or, with endless, never stops coming).
func stallingProxy(t *testing.T, registryHost string, endless bool) (host string, sent *atomic.Int64) {
	t.Helper()
	sent = &atomic.Int64{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registryHost})
	upstream := http.DefaultTransport.(*http.Transport).Clone()
	rp.Transport = upstream
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
			rp.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		if !endless {
			chunk = chunk[:1] // the first byte, then silence
		}
		for {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if !endless {
				select {
				case <-stop:
				case <-r.Context().Done():
				}
				return
			}
			if sent.Load() > 1<<30 { // the test's own bound, so a failing test cannot fill the disk
				return
			}
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close(); upstream.CloseIdleConnections() })
	return strings.TrimPrefix(srv.URL, "http://"), sent
}

// Attack: the registry answers, sends the first bytes of a layer, and then goes silent.
func TestRegistryStallingMidLayerFailsThePull(t *testing.T) {
	reg := startRegistry(t)
	_, ref, _ := pushTwoArch(t, reg.Host)
	host, _ := stallingProxy(t, reg.Host, false)
	c, err := NewCache(t.TempDir(), CacheOptions{Network: registrynet.Policy{Timeout: time.Second, Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pullWithin(t, c, strings.Replace(ref, reg.Host, host, 1), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "sent nothing for 1s") {
		t.Fatalf("pull through a stalling registry: %v, want an error saying it sent nothing for 1s", err)
	}
}

// Attack: a layer larger than the pool accepts, to fill the host's disk. It is refused on
// the manifest's word, before a byte of it is fetched.
func TestLayerOverTheLimitIsNotFetched(t *testing.T) {
	reg := startRegistry(t)
	files := writeArtifacts(t, amd64, 3<<20, 1000) // a 3 MiB kernel
	idx, err := Index(mustBuild(t, files))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := Push(context.Background(), reg.Host+"/anvil/big:1", idx)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, reg.Host)
	c, err := NewCache(t.TempDir(), CacheOptions{MaxLayerBytes: 1 << 20, Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Pull(context.Background(), p.Host+"/anvil/big@"+digest, "", amd64)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-layer-size") {
		t.Fatalf("pull of a 3 MiB layer with a 1 MiB limit: %v, want ErrTooLarge naming --max-layer-size", err)
	}
	kernel, _ := newFileLayer(files.Kernel, MediaTypeKernel)
	if n := p.count("/blobs/" + kernel.digest.String()); n != 0 {
		t.Fatalf("the oversized layer was fetched %d times", n)
	}
}

// Attack: a registry that sends a layer's bytes without end, more than its manifest
// announced: the download stops one byte past the announced size.
func TestEndlessLayerIsCutAtItsAnnouncedSize(t *testing.T) {
	reg := startRegistry(t)
	_, ref, _ := pushTwoArch(t, reg.Host)
	host, sent := stallingProxy(t, reg.Host, true)
	c, dir := newCache(t)
	_, err := pullWithin(t, c, strings.Replace(ref, reg.Host, host, 1), 30*time.Second)
	if err == nil {
		t.Fatal("an endless layer was accepted")
	}
	if n := sent.Load(); n >= 64<<20 {
		t.Fatalf("the registry got to send %d bytes of an endless layer", n)
	}
	assertNoTempFiles(t, dir)
}

// Attack: an image whose registry is the host itself, its private network or the cloud's
// metadata service, to make the pool's host fetch from inside the site. Each is refused
// before a connection is made, naming the address and the flag that would allow it.
func TestNonPublicRegistriesAreRefused(t *testing.T) {
	reg := startRegistry(t)
	_, ref, _ := pushTwoArch(t, reg.Host)
	_, port, _ := net.SplitHostPort(reg.Host)
	c, err := NewCache(t.TempDir(), CacheOptions{}) // the default: nothing allowed
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ reference, says string }{
		{ref, "registry " + reg.Host + " is a loopback address: refused unless the pool allows it (--allow-registry " + reg.Host + ")"},
		{"localhost:" + port + "/anvil/testos:1", "registry localhost:" + port + " resolves to "},
		{"[::1]:" + port + "/anvil/testos:1", "loopback address"},
		{"10.11.12.13:5000/anvil/testos:1", "registry 10.11.12.13:5000 is a private address"},
		{"169.254.169.254/latest:1", "registry 169.254.169.254:443 is a link-local address"},
		{"[fd00::1]:5000/anvil/testos:1", "private address"},
		{"0.0.0.0:" + port + "/anvil/testos:1", "unspecified address"},
	} {
		_, err := pullWithin(t, c, tc.reference, 20*time.Second)
		var refused *registrynet.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("pull of %s: %v, want a refusal saying %q", tc.reference, err, tc.says)
		}
	}
	// The pool's allow-list lets its own registry through.
	allowed, err := registrynet.ParseAllowed(reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	c, err = NewCache(t.TempDir(), CacheOptions{Network: registrynet.Policy{Allow: []registrynet.Allowed{allowed}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pullWithin(t, c, ref, 20*time.Second); err != nil {
		t.Fatalf("pull from the allow-listed %s: %v", reg.Host, err)
	}
}

// Attack: a tenant names a registry the pool's host has credentials for (in its docker
// config), to pull with them what the tenant may not read. The cache presents none.
func TestPullsNeverPresentTheHostsCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			seen = append(seen, a)
		}
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	// The host's keychain: a docker config with a password for exactly this registry.
	dir := t.TempDir()
	config := `{"auths":{"` + host + `":{"auth":"aG9zdDpob3N0LXNlY3JldA=="}}}` // host:host-secret
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	c, err := NewCache(t.TempDir(), loopbackOnly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pullWithin(t, c, host+"/private/os:1", 30*time.Second); err == nil {
		t.Fatal("a pull from a registry that wants credentials succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Fatalf("the pull presented the host's credentials: %v", seen)
	}
}
