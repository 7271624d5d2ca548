package metal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// Twenty Hosts are provisioned at once while Ironic takes at most five deployments (four
// times the limit, as fifty at ten was, at under half the Ironic work): anvil queues the
// rest, every Host ends Provisioned, and no Host ever reports Ironic's refusal (503) or any
// error on its way.
func TestTwentyHostsAgainstTheDeployLimit(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	rig.StartSiteOwnIronic(t, ns, func(c *site.Config) {
		c.MaxConcurrentDeploy = 5
		// Deployments that take a while, so five really are under way at once.
		c.FakeDelays = ironic.FakeDelays{Deploy: ironic.Delay{Min: 1, Max: 2}}
		c.Workers = 20
	})
	d := serveDisk(t)
	const n = 20
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("h%02d", i)
		rig.Create(t, fakeHost(ns, names[i], 1000+i))
	}
	for _, name := range names {
		rig.WaitHost(t, ns, name, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
	}
	w := watchStates(t, ns)
	for _, name := range names {
		update(t, ns, name, func(h *metalv1alpha1.Host) {
			h.Spec.Image, h.Spec.Online = d.Image(), true
			h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: h.Name, UID: h.Name}
		})
	}
	for _, name := range names {
		rig.WaitHost(t, ns, name, "Provisioned", 5*time.Minute, metalpool.Provisioned)
	}
	for _, st := range w.statuses() {
		if st.OperationalStatus == metalv1alpha1.OperationalError || st.LastError != "" {
			t.Errorf("a Host reported an error on its way: %s %q", st.OperationalStatus, st.LastError)
		}
		for _, c := range st.Conditions {
			if strings.Contains(c.Message, "503") || c.Reason == metalv1alpha1.ReasonProvisionerUnavailable {
				t.Errorf("a Host's %s condition reported the provisioner's refusal: %s %q", c.Type, c.Reason, c.Message)
			}
		}
	}
}
