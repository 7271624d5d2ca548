package metal

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// imagePath is where the image server serves disks, kernels and initramfs files:
// imagePath + <sha256 hex>.
const imagePath = "/images/sha256/"

// pullTimeout bounds one pull of an image's files into the cache.
const pullTimeout = 30 * time.Minute

// source is where a file comes from: the image of a machine holding a Host.
type source struct {
	reference, digest string
	arch              computev1alpha1.Architecture
}

// fileSource finds a machine whose Host asks for the file with this checksum. The server
// serves nothing else: not other blobs of the cache, not files no Host wants.
func (r *Runtime) fileSource(checksum string) (source, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var src source
	var found bool
	r.Views.Each(func(host string, m *mriv1alpha1.Machine, _ hostView) {
		h := r.hosts[host]
		if found || h == nil || !slices.Contains(checksums(h.Spec.Image), checksum) {
			return
		}
		img := m.GetSpec().GetImage()
		src, found = source{reference: img.GetReference(), digest: img.GetDigest(), arch: h.Spec.Architecture}, true
	})
	return src, found
}

// serveFile serves one blob (disk, kernel or initramfs) from the cache, pulling the
// image first if needed. Ranges and HEAD work, as the provisioner's downloader may use
// either.
func (r *Runtime) serveFile(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	sum := strings.TrimPrefix(req.URL.Path, imagePath)
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 || strings.ToLower(sum) != sum {
		http.NotFound(w, req)
		return
	}
	src, ok := r.fileSource("sha256:" + sum)
	if !ok {
		http.NotFound(w, req)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), pullTimeout)
	defer cancel()
	files, err := r.opts.Images.Pull(ctx, src.reference, src.digest, src.arch)
	if err != nil {
		r.opts.Logger.Error(err, "pulling an image to serve its file", "image", src.reference, "digest", src.digest, "architecture", src.arch)
		http.Error(w, "the image could not be pulled", http.StatusBadGateway)
		return
	}
	// The cache names blobs by digest: serve the file only when it is the one asked for.
	path := ""
	for _, p := range []string{files.Disk, files.Kernel, files.Initramfs} {
		if p != "" && filepath.Base(p) == sum {
			path = p
		}
	}
	if path == "" {
		http.NotFound(w, req)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "the file is not readable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "the file is not readable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, req, "", fi.ModTime(), f)
}

// prefetch starts pulling a claimed Host's image into the cache, once per image file set,
// so the provisioner's download does not wait for the registry. Failures are left to the
// image server, which pulls again when asked.
func (r *Runtime) prefetch(h *metalv1alpha1.Host) {
	if h.Spec.Image == nil || provisioned(h) {
		return
	}
	checksum := checksums(h.Spec.Image)[0]
	src, ok := r.fileSource(checksum)
	r.mu.Lock()
	if !ok || r.prefetched[checksum] || r.closed {
		r.mu.Unlock()
		return
	}
	r.prefetched[checksum] = true
	r.background.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.background.Done()
		ctx, cancel := context.WithTimeout(r.Closing(), pullTimeout)
		defer cancel()
		start := time.Now()
		if _, err := r.opts.Images.Pull(ctx, src.reference, src.digest, src.arch); err != nil {
			if !errors.Is(err, context.Canceled) {
				r.opts.Logger.Error(err, "prefetching an image", "image", src.reference, "architecture", src.arch)
			}
			r.mu.Lock()
			delete(r.prefetched, checksum)
			r.mu.Unlock()
			return
		}
		r.opts.Logger.V(1).Info("image in the cache", "image", src.reference, "architecture", src.arch, "duration", time.Since(start))
	}()
}
