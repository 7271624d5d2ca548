// Package metal tests the bare-metal half of anvil against a real kube-apiserver and a
// real Ironic (fake-hardware servers): Hosts from enrolment to provisioning and back,
// Ironic losing its database, many deployments against Ironic's limits, bad input, and
// tenancy.
package metal

import (
	"testing"

	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env, shared.Stop) }
