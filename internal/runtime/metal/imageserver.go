package metal

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// imagePath is where the image server serves disks: imagePath + <sha256 hex>.
const imagePath = "/images/sha256/"

// pullTimeout bounds one pull of a disk into the cache.
const pullTimeout = 30 * time.Minute

// source is where a disk comes from: the image of a machine holding a Host.
type source struct {
	reference, digest string
	arch              computev1alpha1.Architecture
}

// diskSource finds a machine whose Host asks for the disk with this checksum. The server
// serves nothing else: not other blobs of the cache, not disks no Host wants.
func (r *Runtime) diskSource(checksum string) (source, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.machines {
		h := r.hosts[v.host]
		if h == nil || h.Spec.Image == nil || h.Spec.Image.Checksum != checksum {
			continue
		}
		img := v.machine.GetSpec().GetImage()
		return source{reference: img.GetReference(), digest: img.GetDigest(), arch: h.Spec.Architecture}, true
	}
	return source{}, false
}

// serveDisk serves one disk blob from the cache, pulling it first if needed. Ranges and
// HEAD work, as the provisioner's downloader may use either.
func (r *Runtime) serveDisk(w http.ResponseWriter, req *http.Request) {
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
	src, ok := r.diskSource("sha256:" + sum)
	if !ok {
		http.NotFound(w, req)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), pullTimeout)
	defer cancel()
	files, err := r.opts.Images.Pull(ctx, src.reference, src.digest, src.arch)
	if err != nil {
		r.opts.Logger.Error(err, "pulling a disk to serve it", "image", src.reference, "digest", src.digest, "architecture", src.arch)
		http.Error(w, "the image could not be pulled", http.StatusBadGateway)
		return
	}
	// The cache names blobs by digest: serve the file only when it is the one asked for.
	if files.Disk == "" || filepath.Base(files.Disk) != sum {
		http.NotFound(w, req)
		return
	}
	f, err := os.Open(files.Disk)
	if err != nil {
		http.Error(w, "the disk is not readable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "the disk is not readable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, req, "", fi.ModTime(), f)
}

// prefetch starts pulling a claimed Host's disk into the cache, once per disk, so the
// provisioner's download does not wait for the registry. Failures are left to the image
// server, which pulls again when asked.
func (r *Runtime) prefetch(h *metalv1alpha1.Host) {
	if h.Spec.Image == nil || provisioned(h) {
		return
	}
	checksum := h.Spec.Image.Checksum
	src, ok := r.diskSource(checksum)
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
		ctx, cancel := context.WithTimeout(r.closing, pullTimeout)
		defer cancel()
		start := time.Now()
		if _, err := r.opts.Images.Pull(ctx, src.reference, src.digest, src.arch); err != nil {
			if !errors.Is(err, context.Canceled) {
				r.opts.Logger.Error(err, "prefetching a disk", "image", src.reference, "architecture", src.arch)
			}
			r.mu.Lock()
			delete(r.prefetched, checksum)
			r.mu.Unlock()
			return
		}
		r.opts.Logger.V(1).Info("disk in the cache", "image", src.reference, "architecture", src.arch, "duration", time.Since(start))
	}()
}
