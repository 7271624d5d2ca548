// Package pkgproxy is a small forward HTTP proxy for package archives, as a site's package
// proxy stands in front of builders: it serves plain-HTTP GET and HEAD requests for the
// hosts it is given, and keeps what never changes under a name (pool files, by-hash
// indexes) in a folder so a test's repeated runs fetch them once.
//
// It never proxies another host, CONNECT, or a method that writes.
package pkgproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Proxy is a running proxy.
type Proxy struct {
	// Addr is where it listens (host:port on loopback).
	Addr  string
	hosts []string
	cache string
	srv   *http.Server
	up    *http.Client

	mu       sync.Mutex
	requests []string // "GET URL STATUS", in order
}

// Start listens on a free loopback port and proxies requests for hosts, keeping immutable
// files under cache (created if missing).
func Start(cache string, hosts ...string) (*Proxy, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), hosts: hosts, cache: cache,
		up: &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{Proxy: nil}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops it.
func (p *Proxy) Close() error { return p.srv.Close() }

// Requests lists what it was asked, in order: "METHOD URL STATUS".
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

func (p *Proxy) record(r *http.Request, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, fmt.Sprintf("%s %s %d", r.Method, r.URL, status))
}

// immutable is a file whose contents its URL fixes: a package, or an index by its hash.
func immutable(urlPath string) bool {
	return strings.Contains(urlPath, "/pool/") || strings.Contains(urlPath, "/by-hash/")
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || r.URL.Scheme != "http" || !slices.Contains(p.hosts, r.URL.Hostname()) {
		http.Error(w, "this proxy serves GET and HEAD of http://"+strings.Join(p.hosts, ", http://"), http.StatusForbidden)
		p.record(r, http.StatusForbidden)
		return
	}
	clean := path.Clean("/" + r.URL.Path)
	local := filepath.Join(p.cache, r.URL.Hostname(), filepath.FromSlash(clean))
	if immutable(clean) && r.URL.RawQuery == "" {
		if f, err := os.Open(local); err == nil {
			defer f.Close()
			http.ServeContent(w, r, "", time.Time{}, f)
			p.record(r, http.StatusOK)
			return
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, h := range []string{"Range", "If-Modified-Since", "If-None-Match", "If-Range", "Cache-Control", "User-Agent"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := p.up.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		p.record(r, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	p.record(r, resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	whole := resp.StatusCode == http.StatusOK && immutable(clean) && r.URL.RawQuery == ""
	if !whole {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_ = p.copyAndKeep(w, resp, local)
}

// copyAndKeep streams the body to w and, when all of it arrived, keeps it at local.
func (p *Proxy) copyAndKeep(w io.Writer, resp *http.Response, local string) error {
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		_, _ = io.Copy(w, resp.Body)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), ".partial-")
	if err != nil {
		_, _ = io.Copy(w, resp.Body)
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(io.MultiWriter(w, tmp), resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return errors.New("short body")
	}
	return os.Rename(tmp.Name(), local)
}
