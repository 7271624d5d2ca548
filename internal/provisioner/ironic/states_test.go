package ironic

import (
	"reflect"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func TestStateOf(t *testing.T) {
	for _, tc := range []struct {
		state, target, lastError string
		want                     provisioner.State
		op                       provisioner.Operation
	}{
		{"enroll", "", "", provisioner.StateEnrolling, provisioner.OpNone},
		{"enroll", "manageable", "old error", provisioner.StateEnrolling, provisioner.OpNone},
		{"enroll", "", "Failed to get power state", provisioner.StateFailed, provisioner.OpRegister},
		{"verifying", "manageable", "", provisioner.StateEnrolling, provisioner.OpNone},
		{"manageable", "", "", provisioner.StateManageable, provisioner.OpNone},
		{"inspecting", "manageable", "", provisioner.StateInspecting, provisioner.OpNone},
		{"inspect wait", "manageable", "", provisioner.StateInspecting, provisioner.OpNone},
		{"inspect failed", "", "x", provisioner.StateFailed, provisioner.OpInspect},
		{"cleaning", "available", "", provisioner.StateCleaning, provisioner.OpNone},
		{"clean wait", "available", "", provisioner.StateCleaning, provisioner.OpNone},
		{"clean failed", "", "x", provisioner.StateFailed, provisioner.OpClean},
		{"available", "", "", provisioner.StateAvailable, provisioner.OpNone},
		{"deploying", "active", "", provisioner.StateDeploying, provisioner.OpNone},
		{"wait call-back", "active", "", provisioner.StateDeploying, provisioner.OpNone},
		{"deploy hold", "active", "", provisioner.StateDeploying, provisioner.OpNone},
		{"deploy failed", "", "x", provisioner.StateFailed, provisioner.OpProvision},
		{"active", "", "", provisioner.StateActive, provisioner.OpNone},
		{"adopting", "active", "", provisioner.StateAdopting, provisioner.OpNone},
		{"adopt failed", "", "x", provisioner.StateFailed, provisioner.OpAdopt},
		{"deleting", "available", "", provisioner.StateDeleting, provisioner.OpNone},
		{"error", "", "x", provisioner.StateFailed, provisioner.OpDelete},
		{"rescue", "", "", provisioner.StateUnknown, provisioner.OpNone},
	} {
		n := &nodes.Node{ProvisionState: tc.state, TargetProvisionState: tc.target, LastError: tc.lastError}
		got, op := stateOf(n)
		if got != tc.want || op != tc.op {
			t.Errorf("stateOf(%q, target %q, error %q) = %s/%s, want %s/%s", tc.state, tc.target, tc.lastError, got, op, tc.want, tc.op)
		}
	}
}

func TestNodeOf(t *testing.T) {
	n := nodeOf(&nodes.Node{
		Name: "ns~h", UUID: "u", ProvisionState: "active", PowerState: "power off", Reservation: "anvil-ironic",
		InstanceInfo: map[string]any{"image_source": "http://i/x.raw", "image_os_hash_algo": "sha256",
			"image_os_hash_value": "ab", "image_disk_format": "raw", "configdrive": "******"},
		Extra: map[string]any{extraHash: "h1"},
	})
	if n.State != provisioner.StateActive || !n.Busy || n.PowerOn == nil || *n.PowerOn || n.RegistrationHash != "h1" ||
		!reflect.DeepEqual(n.Image, provisioner.Image{URL: "http://i/x.raw", Checksum: "sha256:ab", Format: "raw"}) {
		t.Errorf("nodeOf = %+v", n)
	}
	if n := nodeOf(&nodes.Node{ProvisionState: "available"}); n.Busy || n.PowerOn != nil {
		t.Errorf("an idle node with unknown power: %+v", n)
	}
	m := nodeOf(&nodes.Node{ProvisionState: "active", Maintenance: true, Fault: "power failure", MaintenanceReason: "BMC gone"})
	if m.LastError != "BMC gone" {
		t.Errorf("a node in maintenance for a fault: LastError %q, want the maintenance reason", m.LastError)
	}
}

// A failed state keeps the target it failed to reach; Ironic is not working on it then.
func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		n    nodes.Node
		busy bool
	}{
		{nodes.Node{ProvisionState: "deploying", TargetProvisionState: "active"}, true},
		{nodes.Node{ProvisionState: "deploy failed", TargetProvisionState: "active"}, false},
		{nodes.Node{ProvisionState: "deploy failed", TargetProvisionState: "active", Reservation: "c"}, true},
		{nodes.Node{ProvisionState: "clean failed", TargetProvisionState: "available"}, false},
		{nodes.Node{ProvisionState: "active", TargetPowerState: "power off"}, true},
		{nodes.Node{ProvisionState: "available"}, false},
	} {
		if got := busy(&tc.n); got != tc.busy {
			t.Errorf("busy(%s -> %s, power target %q, lock %q) = %v", tc.n.ProvisionState, tc.n.TargetProvisionState, tc.n.TargetPowerState, tc.n.Reservation, got)
		}
	}
}
