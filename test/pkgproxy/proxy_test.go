package pkgproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Through the proxy: an allowed host's files, a pool file fetched upstream once; any other
// host refused.
func TestProxyServesAllowedHostsAndKeepsPoolFiles(t *testing.T) {
	hits := map[string]int{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits[r.URL.Path]++
		io.WriteString(w, "contents of "+r.URL.Path)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	p, err := Start(t.TempDir(), u.Hostname())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	proxyURL, _ := url.Parse("http://" + p.Addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	get := func(raw string) (int, string) {
		resp, err := c.Get(raw)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := 0; i < 2; i++ {
		if code, body := get(upstream.URL + "/debian/pool/main/h/hello/hello_1.deb"); code != 200 || body != "contents of /debian/pool/main/h/hello/hello_1.deb" {
			t.Fatalf("pool file: %d %q", code, body)
		}
		if code, _ := get(upstream.URL + "/debian/dists/bookworm/InRelease"); code != 200 {
			t.Fatalf("InRelease: %d", code)
		}
	}
	if hits["/debian/pool/main/h/hello/hello_1.deb"] != 1 || hits["/debian/dists/bookworm/InRelease"] != 2 {
		t.Errorf("upstream hits %v: want the pool file once, InRelease each time", hits)
	}
	if code, _ := get("http://example.invalid/x"); code != http.StatusForbidden {
		t.Errorf("another host: %d, want 403", code)
	}
	if n := len(p.Requests()); n != 5 || !strings.HasSuffix(p.Requests()[4], "403") {
		t.Errorf("requests %v", p.Requests())
	}
}
