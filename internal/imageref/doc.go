// Package imageref answers questions about OS images in OCI registries for the control
// plane: the digest a reference points at now, and the architectures an image (index)
// offers. It reads manifests only, never layers.
//
// Registries on loopback addresses are spoken to over plain HTTP (the embedded registry
// of anvil dev and the tests); all others over HTTPS.
package imageref
