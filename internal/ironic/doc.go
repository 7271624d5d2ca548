// Package ironic runs OpenStack Ironic (API and conductor in one `ironic` process) for one
// bare-metal site and keeps it running: it writes the configuration into a state
// directory, creates the SQLite schema, starts the process in its own process group on a
// loopback port behind HTTP basic auth, and restarts it when it exits or stops answering,
// creating the schema again when the database was lost.
//
// It never talks to nodes: internal/provisioner/ironic does, through the Endpoint this
// package reports. It never logs the Ironic password, which it only writes as a bcrypt
// hash into an htpasswd file.
package ironic
