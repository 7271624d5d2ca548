// Package diskimage serves a small raw disk image over HTTP on loopback, as the metal
// runtime serves OS disks to Ironic: the bare-metal tests and the 200-Host benchmark deploy
// it by URL and checksum.
package diskimage

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// Server serves one 1 MiB disk at URL; any other path is 404.
type Server struct {
	// URL of the disk, and SHA256 its hex digest.
	URL, SHA256 string
	srv         *httptest.Server
}

// Serve starts a server; Close stops it.
func Serve() *Server {
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
	return &Server{URL: srv.URL + "/disk.raw", SHA256: hex.EncodeToString(sum[:]), srv: srv}
}

// Base is the server's root URL, for paths that do not exist.
func (s *Server) Base() string { return s.srv.URL }

// Checksum is the disk's checksum as a Host's image carries it.
func (s *Server) Checksum() string { return "sha256:" + s.SHA256 }

// Image is the disk as a Host's spec.image.
func (s *Server) Image() *metalv1alpha1.HostImage {
	return &metalv1alpha1.HostImage{URL: s.URL, Checksum: s.Checksum(), Format: metalv1alpha1.ImageFormatRaw}
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }
