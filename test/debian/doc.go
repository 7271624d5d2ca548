// Package debian boots anvil's Debian 12 image (make debian; hack/debian, docs/debian.md)
// on anvil's pools and asks the booted OS itself, over SSH through the Machine's forward,
// what its own cloud-init did with the Machine's first-boot data.
package debian
