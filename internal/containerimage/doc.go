// Package containerimage assembles anvil's own container images (docs/images.md): a
// deterministic tar layer from a file tree or a list of files, an image config with OCI
// labels, a multi-architecture index of such images, an OCI image layout on disk, and a
// push of an index to a registry.
//
// The same inputs always give the same bytes, hence the same digests: entries in a fixed
// order, one modification time (the source's commit time), owner root, no access or
// change times, no wall-clock "created". It never runs a build step inside an image (no
// RUN, no container runtime, no Docker daemon) and never decides what an image holds:
// hack/images says that.
package containerimage
