// Package ironic implements provisioner.Provisioner on OpenStack Ironic's bare-metal API
// (gophercloud v2), against the Ironic that internal/ironic runs.
//
// Nodes are named by Registration.Name and always looked up by that name: the package never
// lists every node except once, at construction, to learn which nodes are deploying or
// cleaning. It keeps its own FIFO queues of deploys and cleanings so that no more than
// MaxConcurrentDeploy / MaxConcurrentClean run at once from this process; a call beyond
// the limit returns provisioner.ErrBusy at once instead of blocking.
//
// It must never put a BMC password or Ironic's password in an error or a log line, and
// never let an Ironic 503 reach a caller as anything but provisioner.ErrUnavailable.
package ironic
