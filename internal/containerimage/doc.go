// Package containerimage assembles the container images anvil builds (docs/images.md): a
// deterministic tar layer from a file tree or a list of files, an image config with OCI
// labels (the Source read from a git checkout), a multi-architecture index of such images,
// an OCI image layout on disk, its sizes, and a push of an index to a registry.
//
// The same inputs always give the same bytes, hence the same digests: entries in a fixed
// order, one modification time (the source's commit time), owner root, no access or
// change times, no wall-clock "created". It never runs a build step inside an image (no
// RUN, no container runtime, no Docker daemon) and never decides what an image holds:
// hack/images (anvil's own) and hack/kubeimages (kubeadm's) say that.
package containerimage
