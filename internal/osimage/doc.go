// Package osimage reads and writes anvil's OS images: OCI artifacts whose layers are a
// kernel, an initramfs and/or a disk (raw or qcow2) with a small config (architecture,
// kernel command line), one image per architecture under an OCI image index whose
// entries carry their platform. It builds images from local files, pushes them, and
// pulls the entry of one architecture into a content-addressed cache on local disk.
//
// It never trusts what a registry sends: every blob is checked against its digest and
// size before it becomes visible in the cache, and a manifest that is not an anvil OS
// image is refused rather than guessed at. It never modifies a blob once it is cached.
package osimage
