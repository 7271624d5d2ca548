package metal

// ImageChecksumsInUse lists the checksums ("sha256:<hex>") of the files the Hosts of the
// runtime's machines are deployed from or boot: the image cache must not evict them while
// a server may still download them (osimage.Cache.BlobPaths, SetInUse).
func (r *Runtime) ImageChecksumsInUse() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, v := range r.machines {
		if h := r.hosts[v.host]; h != nil {
			out = append(out, checksums(h.Spec.Image)...)
		}
	}
	return out
}
