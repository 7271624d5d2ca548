// Command anvil is the one binary of anvil: the control plane for development (`anvil
// dev`), the controller manager, and later the poollet, the runtimes and the image tools.
package main
