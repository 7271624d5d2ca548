package ironic

import (
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Ironic's provision states (ironic/common/states.py) that anvil acts on.
const (
	stEnroll        = "enroll"
	stVerifying     = "verifying"
	stManageable    = "manageable"
	stInspecting    = "inspecting"
	stInspectWait   = "inspect wait"
	stInspectFailed = "inspect failed"
	stCleaning      = "cleaning"
	stCleanWait     = "clean wait"
	stCleanFailed   = "clean failed"
	stAvailable     = "available"
	stDeploying     = "deploying"
	stDeployWait    = "wait call-back"
	stDeployFailed  = "deploy failed"
	stActive        = "active"
	stAdopting      = "adopting"
	stAdoptFailed   = "adopt failed"
	stDeleting      = "deleting"
	stError         = "error"
)

// Keys anvil keeps in a node's extra.
const (
	extraHash = "anvil_registration_hash"
)

// stateOf maps an Ironic node to the provisioner's state, and for a failed node the
// operation that failed.
func stateOf(n *nodes.Node) (provisioner.State, provisioner.Operation) {
	switch n.ProvisionState {
	case stEnroll:
		// A failed manage (BMC unreachable, bad credentials) leaves the node in enroll
		// with last_error set.
		if n.LastError != "" && n.TargetProvisionState == "" {
			return provisioner.StateFailed, provisioner.OpRegister
		}
		return provisioner.StateEnrolling, provisioner.OpNone
	case stVerifying:
		return provisioner.StateEnrolling, provisioner.OpNone
	case stManageable:
		return provisioner.StateManageable, provisioner.OpNone
	case stInspecting, stInspectWait:
		return provisioner.StateInspecting, provisioner.OpNone
	case stCleaning, stCleanWait:
		return provisioner.StateCleaning, provisioner.OpNone
	case stAvailable:
		return provisioner.StateAvailable, provisioner.OpNone
	case stDeploying, stDeployWait:
		return provisioner.StateDeploying, provisioner.OpNone
	case stActive:
		return provisioner.StateActive, provisioner.OpNone
	case stAdopting:
		return provisioner.StateAdopting, provisioner.OpNone
	case stDeleting:
		return provisioner.StateDeleting, provisioner.OpNone
	case stDeployFailed:
		return provisioner.StateFailed, provisioner.OpProvision
	case stCleanFailed:
		return provisioner.StateFailed, provisioner.OpClean
	case stInspectFailed:
		return provisioner.StateFailed, provisioner.OpInspect
	case stAdoptFailed:
		return provisioner.StateFailed, provisioner.OpAdopt
	case stError:
		// Ironic's error state follows a failed tear-down.
		return provisioner.StateFailed, provisioner.OpDelete
	}
	if strings.HasPrefix(n.ProvisionState, "deploy") {
		return provisioner.StateDeploying, provisioner.OpNone
	}
	return provisioner.StateUnknown, provisioner.OpNone
}

// busy: Ironic is working on the node (a target state, a power change, or its lock). A
// failed state keeps the target it failed to reach ("deploy failed", target "active"):
// nothing is in progress there.
func busy(n *nodes.Node) bool {
	working := n.TargetProvisionState != "" && !failed(n.ProvisionState)
	return working || n.TargetPowerState != "" || n.Reservation != ""
}

// failed: a state Ironic leaves a node in after an operation failed.
func failed(state string) bool {
	switch state {
	case stDeployFailed, stCleanFailed, stInspectFailed, stAdoptFailed, stError:
		return true
	}
	return false
}

// nodeOf is the provisioner's view of an Ironic node.
func nodeOf(n *nodes.Node) provisioner.Node {
	st, op := stateOf(n)
	out := provisioner.Node{
		Name:       n.Name,
		ID:         n.UUID,
		State:      st,
		FailedFrom: op,
		Busy:       busy(n),
		LastError:  n.LastError,
	}
	switch n.PowerState {
	case "power on":
		out.PowerOn = ptr(true)
	case "power off":
		out.PowerOn = ptr(false)
	}
	// A node Ironic put in maintenance (power sync failing: BMC gone) says why there.
	if out.LastError == "" && n.Maintenance && n.Fault != "" {
		out.LastError = n.MaintenanceReason
	}
	switch st {
	case provisioner.StateActive, provisioner.StateDeploying, provisioner.StateAdopting, provisioner.StateFailed:
		out.Image = imageOf(n.InstanceInfo)
	}
	if h, ok := n.Extra[extraHash].(string); ok {
		out.RegistrationHash = h
	}
	return out
}

func ptr[T any](v T) *T { return &v }
