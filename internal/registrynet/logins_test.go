package registrynet

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadLogins(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := filepath.Join(dir, "written.json")
	if err := WriteLogins(p, Login{Username: "pool", Password: "pa:ss"}, "127.0.0.1:5000", "localhost:5000"); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLogins(p)
	if err != nil || len(got) != 2 || got["127.0.0.1:5000"] != (Login{"pool", "pa:ss"}) || got["localhost:5000"] != got["127.0.0.1:5000"] {
		t.Fatalf("written and read back: %v %v", got, err)
	}
	got, err = LoadLogins(write(`{"auths": {"https://reg.example/v2/": {"username": "u", "password": "p"}}}`))
	if err != nil || got["reg.example"] != (Login{"u", "p"}) {
		t.Fatalf("a scheme and path: %v %v", got, err)
	}
	if got, err := LoadLogins(""); err != nil || got != nil {
		t.Fatalf("no file: %v %v", got, err)
	}
	for _, bad := range []string{`not json`, `{"auths": {"r": {"auth": "!!"}}}`, `{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}`, `{"auths": {"": {"username": "u"}}}`, `{"auths": {"r": {}}}`} {
		if _, err := LoadLogins(write(bad)); err == nil {
			t.Errorf("%s: loaded, want an error", bad)
		} else if strings.Contains(err.Error(), "bm9jb2xvbg") {
			t.Errorf("%s: the error %q repeats the secret", bad, err)
		}
	}
}

// Attack: a tenant names its own registry, hoping the pool presents the infrastructure
// registry's login there too, or redirects the pool's request to itself. The login goes to
// its registry's exact address and nowhere else.
func TestLoginsGoOnlyToTheirRegistry(t *testing.T) {
	seen := map[string]string{}
	tenant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen["tenant"] = r.Header.Get("Authorization")
	}))
	defer tenant.Close()
	infra := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, tenant.URL+"/stolen", http.StatusFound)
			return
		}
		seen["infra"] = r.Header.Get("Authorization")
	}))
	defer infra.Close()
	infraHost := strings.TrimPrefix(infra.URL, "http://")
	p := Policy{AnyAddress: true, Logins: map[string]Login{infraHost: {"pool", "secret"}}}
	c := &http.Client{Transport: p.Transport()}
	for _, u := range []string{infra.URL + "/v2/", tenant.URL + "/v2/"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if seen["infra"] == "" || seen["tenant"] != "" {
		t.Fatalf("Authorization at the infrastructure registry %q, at the tenant's %q: want the login at the first only", seen["infra"], seen["tenant"])
	}
	resp, err := c.Get(infra.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen["tenant"] != "" {
		t.Fatalf("a redirect to the tenant's registry carried %q", seen["tenant"])
	}
}
