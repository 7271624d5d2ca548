// Package broker is the brokers' end to end: a region and two sites, each a whole `anvil dev`
// on loopback, the region's pools being `anvil runtime broker` processes (with their
// poollets) that place the region's Machines on the sites' fake, QEMU and bare-metal
// pools. It boots real guests (QEMU, both architectures) and runs Ironic.
package broker
