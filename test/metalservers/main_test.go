// Package metalservers tests the bare-metal half of anvil on emulated servers: QEMU guests
// (TCG) behind the Redfish BMC emulator (internal/bmcemu), inspected and deployed by a
// real Ironic, booting tenants' Machines, adopted across Ironic's and the emulator's
// restarts and the loss of the Hosts' status, and wiped between tenants. It boots guests:
// hack/test.sh runs it in the heavy lane; test/metal has the fake-hardware tests.
package metalservers

import (
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/metalpool"
)

var rig metalpool.Rig

func TestMain(m *testing.M) { harness.Main(m, &rig.Env, rig.Shared.Stop) }
