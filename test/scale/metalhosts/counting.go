package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// countingTransport counts the requests sent to one host, by method, and the answers
// that tell the caller to come back (409 locked, 503 busy).
type countingTransport struct {
	next http.RoundTripper
	host string // host:port of Ironic; set once before any request to it

	mu sync.Mutex
	c  counts
}

type counts map[string]int

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if req.URL.Host != t.host {
		return resp, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == nil {
		t.c = counts{}
	}
	t.c[req.Method+" "+shape(req.URL)]++
	if resp != nil && (resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusServiceUnavailable) {
		t.c[fmt.Sprint(resp.StatusCode)]++
	}
	return resp, err
}

func (t *countingTransport) snapshot() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := counts{}
	for k, v := range t.c {
		out[k] = v
	}
	return out
}

func (c counts) minus(before counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// perHost is "total T (T/n per host): GET g, POST p, ...; 409 x, 503 y".
func (c counts) perHost(n int) string {
	var total int
	var methods, codes []string
	for k, v := range c {
		if !strings.Contains(k, " ") {
			codes = append(codes, fmt.Sprintf("%s %d", k, v))
			continue
		}
		total += v
		methods = append(methods, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(methods)
	sort.Strings(codes)
	s := fmt.Sprintf("total %d (%.1f per host): %s", total, float64(total)/float64(max(n, 1)), strings.Join(methods, ", "))
	if len(codes) > 0 {
		s += "; answered " + strings.Join(codes, ", ")
	}
	return s
}

// shape is a request's path without the node's name or uuid (nodes/*/states/provision),
// with "?fields" when it asks for some fields only.
func shape(u *url.URL) string {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(u.Path, "/v1"), "/"), "/")
	if len(segs) > 1 && (segs[0] == "nodes" || segs[0] == "ports") {
		segs[1] = "*"
	}
	s := strings.Join(segs, "/")
	if u.Query().Has("fields") {
		s += "?fields"
	}
	return s
}

func hostOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Host
}

// cpuSeconds is the user and system CPU time process pid has used, with its waited-for
// children; 0 when it cannot be read.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	}
	return ticks / 100 // USER_HZ
}
