// Package host is the Host controller: the only code that calls the provisioner. Each
// reconcile reads the Host and the provisioner's view of its server, asks
// internal/metal/hostplan what to do, does that one thing (two when registration comes
// first) and patches the Host's status once.
//
// The provisioner has no watch, so while a server is busy (enrolling, inspecting,
// deploying, cleaning) its Host is looked at again every BusyPoll; a Host at rest is
// looked at every Resync, and at once when something signals Triggers (Ironic restarted).
package host
