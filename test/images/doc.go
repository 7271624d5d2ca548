// Package images tests anvil's container images as `make images` builds them
// (hack/images, docs/images.md): it builds them twice from the same checkout and Debian
// cache and compares the index digests, checks each index's platforms, labels and
// binaries, runs the amd64 images' QEMU and Ironic under chroot (arm64's are checked by
// their ELF headers), and pushes to a real registry and reads the indexes back by digest.
//
// It needs root (chroot, unshare), apt-get and dpkg-deb (Debian), the network or a warm
// Debian cache (~/.cache/anvil/images), and make eraser esp; a missing one fails the test
// with what to run. It never skips.
package images
