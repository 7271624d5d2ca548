package metalservers

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// The emulated server of TestEmulatedServerRestoredWithoutStatus.
var restoredServer = bmcemu.Spec{Name: "server-r", CPUs: 2, MemoryMiB: 1024, DiskGiB: 8, DataDiskMiB: 64, MAC: "52:54:00:aa:00:0a"}

// A tenant's Machine runs on an emulated server. Its Host's status is cleared while Ironic
// runs (everything is found again), then Ironic loses its database and the status is
// cleared again (a restore from a backup without status, with Ironic's database gone): the
// server is adopted from the Host's deployment record, and its console shows one boot.
// The Machine deleted, the server is being wiped by the site's eraser when Ironic loses its
// database and the status is cleared once more: the server is not adopted as the tenant's
// nor handed out unwiped; the eraser runs to its end, the Machine is gone, and the next
// tenant's Machine boots once on the wiped server. No Host is ever held by two Machines,
// nor by one that does not exist.
func TestEmulatedServerRestoredWithoutStatus(t *testing.T) {
	ctx := context.Background()
	counter := &ironictest.Counting{}
	tt := startTwoTenants(t, restoredServer, "emulated-restored", "restored", func(c *site.Config) { c.WrapProvisioner = counter.Wrap })
	infra, e, p := tt.infra, tt.e, tt.pool
	host, node := restoredServer.Name, infra+"~"+restoredServer.Name
	console := e.ConsolePath(host)
	image := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	rig.WaitHost(t, infra, host, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
	const ready = "ANVIL-TESTOS-READY arch=x86_64 "
	boots := func() int { raw, _ := os.ReadFile(console); return strings.Count(string(raw), ready) }
	machines := func() map[string]bool {
		out := map[string]bool{}
		for _, ns := range []string{tt.a, tt.b} {
			var list computev1alpha1.MachineList
			if err := rig.Env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, m := range list.Items {
				out[string(m.UID)] = true
			}
		}
		return out
	}
	deploy := func(ns, name string) {
		t.Helper()
		runMachine(t, ns, name, tt.class.Name, image, "#cloud-config\n# anvil-marker="+name+"\n")
		waitConsole(t, console, "marker="+name, 1, 3*time.Minute)
	}
	adopted := func(what string) {
		t.Helper()
		rig.WaitHost(t, infra, host, what, 3*time.Minute, func(h *metalv1alpha1.Host) bool {
			n, err := p.Site.Provisioner.Get(ctx, node)
			return metalpool.Provisioned(h) && err == nil && n.State == provisioner.StateActive
		})
		rig.MachineState(t, tt.a, "alpha", "Running", time.Minute, func(m *computev1alpha1.Machine) bool {
			return m.Status.State == computev1alpha1.MachineStateRunning
		})
		time.Sleep(5 * time.Second) // a deployment or a reboot would print the ready line again by now
		if n := boots(); n != 1 {
			raw, _ := os.ReadFile(console)
			t.Fatalf("%s: the console shows %d boots, want the one of the deployment:\n%s", what, n, devproc.LastLines(string(raw), 30))
		}
		rig.CheckClaims(t, infra, machines())
	}

	deploy(tt.a, "alpha")
	rig.ClearStatus(t, infra, host)
	adopted("found again with its status cleared")
	ironicLosesItsDatabase(t, p)
	rig.ClearStatus(t, infra, host)
	adopted("adopted with its status cleared and Ironic's database lost")
	if c := counter.Snapshot(); c.Started[node] != 1 || c.Adopt[node] != 1 {
		t.Fatalf("%d deployments started and %d adoptions; want the first deployment and one adoption", c.Started[node], c.Adopt[node])
	}

	// Released and being wiped when the status and Ironic's database are lost.
	go deleteMachineLater(tt.a, "alpha")
	rig.WaitHost(t, infra, host, "wiping", 5*time.Minute, func(h *metalv1alpha1.Host) bool {
		c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped)
		return c != nil && c.Reason == metalv1alpha1.ReasonWiping
	})
	// The eraser's deployment on its way: Ironic has powered the server on with it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return redfishPower(t, e, host) == "On", nil
	}); err != nil {
		t.Fatal("the eraser was never powered on")
	}
	adoptions := counter.Snapshot().Adopt[node]
	ironicLosesItsDatabase(t, p)
	rig.ClearStatus(t, infra, host)
	var availableUnwiped, provisionedAgain bool
	h := rig.WaitHost(t, infra, host, "wiped, Available and free again", 5*time.Minute, func(h *metalv1alpha1.Host) bool {
		c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped)
		if h.Status.ProvisioningState == metalv1alpha1.StateAvailable && (c == nil || c.Status != metav1.ConditionTrue) {
			availableUnwiped = true
		}
		if h.Status.ProvisioningState == metalv1alpha1.StateProvisioned {
			provisionedAgain = true
		}
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Spec.ConsumerRef == nil && c != nil && c.Status == metav1.ConditionTrue
	})
	deleteMachine(t, tt.a, "alpha", 2*time.Minute)
	if availableUnwiped || provisionedAgain {
		t.Errorf("while recovering the wipe the Host was Available unwiped: %v; Provisioned (the tenant's server again): %v", availableUnwiped, provisionedAgain)
	}
	if c := counter.Snapshot(); c.Adopt[node] != adoptions || c.Started[node] != 1 {
		t.Errorf("the server being wiped was adopted %d times, %d deployments started (want none more)", c.Adopt[node]-adoptions, c.Started[node]-1)
	}
	if _, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]; ok {
		t.Errorf("the wiped, released Host keeps its deployment record %s", h.Annotations[metalv1alpha1.AnnotationDeployment])
	}
	raw, _ := os.ReadFile(console)
	if !strings.Contains(string(raw), "ANVIL-ERASER-DONE disks=") || boots() != 1 {
		t.Errorf("the eraser did not run to its end, or the tenant's image booted again (%d boots); console:\n%s", boots(), devproc.LastLines(string(raw), 30))
	}

	// The next tenant's Machine boots once on the wiped server.
	deploy(tt.b, "beta")
	if n := boots(); n != 2 {
		t.Errorf("the console shows %d boots after the second tenant's deployment, want 2 (one each)", n)
	}
	rig.CheckClaims(t, infra, machines())
}
