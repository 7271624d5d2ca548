// Package buildagent is the program that runs inside a builder Machine (cmd/anvil-build-agent):
// it reads its job, pulls its architecture's entry of the base image, unpacks the root
// (the initramfs), runs the build's operations in a chroot of that root with the
// architecture's own binaries, packs the root again deterministically, pushes the image
// under its hash tag and its log as an artifact, and reports the result.
//
// It never decides what a recipe means: the job carries the Program that the controller
// interpreted (internal/imagebuild/containerfile). It never writes outside the root it
// unpacked, whatever the base archive holds.
package buildagent
