// Package metal tests the bare-metal half of anvil against a real kube-apiserver and a
// real Ironic with fake hardware only (no server boots): Hosts from enrolment to
// provisioning and back, Ironic losing its database in every state, many deployments
// against Ironic's limits, bad input, power failures, tenancy, and a tenant's Machine on a
// metal pool. test/metalservers runs the same rig on emulated servers (QEMU guests).
package metal

import (
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/metalpool"
)

var rig metalpool.Rig

func TestMain(m *testing.M) { harness.Main(m, &rig.Env, rig.Shared.Stop) }
