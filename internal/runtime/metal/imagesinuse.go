package metal

import mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"

// ImageChecksumsInUse lists the checksums ("sha256:<hex>") of the files the Hosts of the
// runtime's machines are deployed from or boot: the image cache must not evict them while
// a server may still download them (osimage.Cache.BlobPaths, SetInUse).
func (r *Runtime) ImageChecksumsInUse() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	r.Views.Each(func(host string, _ *mriv1alpha1.Machine, _ hostView) {
		if h := r.hosts[host]; h != nil {
			out = append(out, checksums(h.Spec.Image)...)
		}
	})
	return out
}
