package osimage

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// writeArtifacts writes random kernel and initramfs files of the given sizes for arch
// into a fresh folder and returns them as Files.
func writeArtifacts(t testing.TB, arch computev1alpha1.Architecture, kernelSize, initramfsSize int) Files {
	t.Helper()
	dir := t.TempDir()
	f := Files{Architecture: arch, KernelCommandLine: "console=ttyS0 anvil.arch=" + string(arch)}
	f.Kernel = writeRandom(t, filepath.Join(dir, "kernel"), kernelSize)
	if initramfsSize > 0 {
		f.Initramfs = writeRandom(t, filepath.Join(dir, "initramfs"), initramfsSize)
	}
	return f
}

func writeRandom(t testing.TB, path string, size int) string {
	t.Helper()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// loopbackOnly is the cache options of tests, whose registries are on loopback.
var loopbackOnly = CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}}

func startRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Pushes dial spare connections that never carry a request; the server's
		// Shutdown waits 5 s for those unless the client closes them first.
		if tr, ok := remote.DefaultTransport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
		_ = reg.Stop()
	})
	return reg
}

// proxy sits between a cache and the registry: it counts GET requests by path and can
// corrupt the body of one blob.
type proxy struct {
	Host string

	mu      sync.Mutex
	gets    map[string]int
	corrupt string // a digest whose blob body gets one byte flipped
}

func startProxy(t testing.TB, registryHost string) *proxy {
	t.Helper()
	p := &proxy{gets: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registryHost})
	// Its own transport, whose spare connections are closed with the proxy: the registry's
	// Stop otherwise waits seconds for a connection that never carried a request.
	upstream := http.DefaultTransport.(*http.Transport).Clone()
	rp.Transport = upstream
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		corrupt := p.corrupt
		p.mu.Unlock()
		if corrupt == "" || !strings.HasSuffix(resp.Request.URL.Path, "/blobs/"+corrupt) || resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if len(b) > 0 {
			b[len(b)/2] ^= 0xff
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			p.mu.Lock()
			p.gets[r.URL.Path]++
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		upstream.CloseIdleConnections()
	})
	p.Host = strings.TrimPrefix(srv.URL, "http://")
	return p
}

// count returns how many GETs reached paths ending in suffix.
func (p *proxy) count(suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for path, c := range p.gets {
		if strings.HasSuffix(path, suffix) {
			n += c
		}
	}
	return n
}

func (p *proxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets = map[string]int{}
}

func (p *proxy) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.gets {
		out[k] = v
	}
	return out
}
