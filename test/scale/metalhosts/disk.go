package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
)

// disk is a 1 MiB raw disk image served on loopback, as the metal runtime serves one;
// both paths deploy it by the same URL and checksum.
type disk struct {
	url, sha256 string
	srv         *httptest.Server
}

func serveDisk() *disk {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	sum := sha256.Sum256(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk.raw" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	return &disk{url: srv.URL + "/disk.raw", sha256: hex.EncodeToString(sum[:]), srv: srv}
}

func (d *disk) close() { d.srv.Close() }
