// Package ironic runs OpenStack Ironic (API and conductor in one `ironic` process) for one
// bare-metal site and keeps it running: it writes the configuration into a state
// directory, creates the SQLite schema, starts the process in its own process group on a
// loopback port behind HTTP basic auth, and restarts it when it exits or stops answering,
// creating the schema again when the database was lost. Beside it, under the same rules
// and on a port of its own, it runs ironic-inspector (standalone, no message bus), which
// Ironic's inspect interface "inspector" uses for in-band inspection.
//
// It never talks to nodes: internal/provisioner/ironic does, through the Endpoint this
// package reports. It never logs a password: the caller's Ironic password is only written
// as a bcrypt hash into an htpasswd file, and the passwords Ironic and ironic-inspector
// use to call each other are generated on every Start and only written into their
// configuration files in the state directory (readable by the owner only).
package ironic
