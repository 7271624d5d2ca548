// Package metal is the Machine Runtime Interface runtime for one bare-metal pool: a
// machine is a Host of the pool's infrastructure namespace, claimed for it. The runtime
// talks only to the API server. It claims a free Host with an optimistic-concurrency
// update of its spec (consumerRef, image, configDrive, online), reads the Host's status
// to report the machine, on reimage points the image (and config drive) elsewhere and asks
// for a rebuild in place (the metal.anvil.dev/rebuild annotation), and on delete clears the
// image and power intent and, once the Host is Available again, the claim. The Host controller (internal/controller/host)
// turns those spec changes into provisioner calls; this package never calls Ironic. It
// serves each claimed Host's OS files (the disk layer, or a kernel and initramfs booted
// from RAM) over HTTP from the image cache, writes each machine's
// config drive as a Secret, and projects the Host's HardwareData into the Machine's
// namespace for its tenant.
//
// Everything the MRI reports lives on the Host (annotations) and in the config-drive
// Secret, so a restarted runtime loses nothing. It must never claim a Host without an
// update that carries a resourceVersion read from the API server, never write a Host's
// status, and never copy anything naming a Host, its namespace or its BMC into a
// tenant's namespace.
package metal
