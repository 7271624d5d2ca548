// Package osimage holds the controllers of OS image builds: the OSImage controller turns an
// OSImage's inputs into per-architecture hashes (internal/imagebuild) and one OSImageBuild
// per distinct set of them; the OSImageBuild controller runs each architecture's build on a
// builder Machine of that architecture, reads the result from the registry, and publishes
// the index. The OSImage controller also rolls a published index out to the Machines
// booting the output tag, a wave at a time (internal/rollout decides; it asks a Machine
// through annotations its poollet acts on), and the ImageUpToDate controller says of each
// Machine whether it runs what its tag publishes. All are thin: every decision is in
// internal/imagebuild and internal/rollout.
//
// They never build anything themselves and never reach a guest: a builder gets its job
// through its first-boot config and answers through the registry.
package osimage
