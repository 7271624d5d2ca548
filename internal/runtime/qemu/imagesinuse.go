package qemu

// ImageFilesInUse lists the image files (paths inside the image cache) the runtime's
// machines boot from or back their disks with: the cache must not evict them
// (osimage.Cache.SetInUse).
func (r *Runtime) ImageFilesInUse() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var files []string
	for _, m := range r.machines {
		if b := m.rec.Boot; b != nil {
			for _, f := range []string{b.Kernel, b.Initramfs, b.Disk} {
				if f != "" {
					files = append(files, f)
				}
			}
		}
	}
	return files
}
