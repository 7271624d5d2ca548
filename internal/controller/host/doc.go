// Package host is the Host controller: the only code that calls the provisioner. Each
// reconcile observes the Host and the provisioner's view of its server, then loops: hostplan
// decides the next action, the controller carries it out, and hostplan concludes what the
// outcome means (a failure's Reason, waiting or backing off) and whether the next action can
// follow at once (after registering, or reading inspected hardware). Each action runs at
// most once a reconcile; the status is patched once at the end.
//
// The provisioner has no watch, so while a server is busy (enrolling, inspecting,
// deploying, cleaning) its Host is looked at again every BusyPoll; a Host at rest is
// looked at every Resync, and at once on Recheck (a deploy or clean slot freed, Ironic
// restarted and maybe lost its records). A Host whose power change failed is looked at
// when the planner's back-off ends, which it computes from the Host's status alone.
// Messages from the provisioner go into the status and Events only once cut of the BMC's
// password and any URL's user information (hostplan.Redact).
package host
