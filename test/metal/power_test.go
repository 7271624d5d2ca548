package metal

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/test/metalpool"
	"github.com/anvil-dev/anvil/test/redfishbmc"
)

// TestPowerFailureReportedAndBackedOff is a server whose power-on Ironic keeps
// failing, on a real Ironic and a Redfish BMC that refuses every power change: the Host
// says so (Error, Ready PowerChangeFailed with Ironic's message and no password, a Warning
// Event), the BMC is asked again with back-off rather than at every poll, and once the BMC
// switches the power the Host is OK and its record of the failures gone.
func TestPowerFailureReportedAndBackedOff(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	// A short cap keeps the test short; the back-off's shape is hostplan's to test.
	rig.StartSite(t, ns, func(c *site.Config) { c.MaxBackoff = 8 * time.Second })
	srv, sys := redfishbmc.StartSystem(t, "Off")
	sys.RefuseResets(true)
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-power"},
		Data: map[string][]byte{"username": []byte(redfishbmc.Username), "password": []byte(redfishbmc.Password)}}
	h := fakeHost(ns, "powerless", 2101)
	h.Spec.BMC = metalv1alpha1.BMC{Address: redfishbmc.Address(srv), CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: creds.Name}}
	h.Spec.Online = true
	// The BMC has no inventory for Redfish inspection: the hardware is known already.
	hw := &metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.Name},
		Spec: metalv1alpha1.HardwareDataSpec{Architecture: h.Spec.Architecture, CPU: metalv1alpha1.CPU{Count: 2}, MemoryMiB: 2048}}
	rig.Create(t, creds, hw, h)

	got := rig.WaitHost(t, ns, h.Name, "failed with PowerChangeFailed", 3*time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonPowerChangeFailed))
	ready := metalpool.Condition(got, metalv1alpha1.ConditionReady)
	if !strings.Contains(got.Status.LastError, "Failed to change power state") || ready.Message != got.Status.LastError ||
		got.Status.PowerChange == nil || got.Status.PowerChange.Failures < 1 || got.Status.PowerState != metalv1alpha1.PowerOff {
		t.Fatalf("want Ironic's message in lastError and Ready, the failure counted, the power Off; status: %s, powerChange %+v",
			metalpool.Describe(got), got.Status.PowerChange)
	}
	assertNoSecret(t, got, redfishbmc.Password)
	var warning string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := rig.Env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == h.Name && e.Reason == metalv1alpha1.ReasonPowerChangeFailed && e.Type == corev1.EventTypeWarning {
				warning = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil || strings.Contains(warning, redfishbmc.Password) {
		t.Fatalf("the Warning Event PowerChangeFailed: %q (%v)", warning, err)
	}

	// Asked again with back-off (5 s, then 8 s), not at every half-second poll as before.
	before := sys.Resets()
	time.Sleep(20 * time.Second)
	if asked := sys.Resets() - before; asked > 5 {
		t.Fatalf("the BMC was asked for %d power changes in 20 s; want a back-off", asked)
	}

	sys.RefuseResets(false)
	rig.WaitHost(t, ns, h.Name, "powered on once the BMC switches the power", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Status.PowerState == metalv1alpha1.PowerOn &&
			h.Status.PowerChange == nil && h.Status.LastError == ""
	})
	if sys.Power() != "On" {
		t.Fatalf("the BMC's server is %s", sys.Power())
	}
}
