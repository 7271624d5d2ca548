package metal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// recoveryRow is one Host of TestIronicLosesItsDatabaseInEveryState: where it is when
// Ironic loses its database, whether its status is cleared too, and where it must end.
type recoveryRow struct {
	name string
	// deployed: provisioned with imgX for its consumer before anything else happens.
	deployed bool
	// at is the provisioner state the Host's node must be in at the loss ("" for none).
	at provisioner.State
	// clear: its status is cleared through the status subresource after the database is
	// deleted (a restore from a backup without status).
	clear bool
	// end: Provisioned with image (for consumer), or Available with no consumer.
	provisioned bool
	image       string // "x" or "y"
	consumer    string
	// starts is how many deployments (provisions and rebuilds) the provisioner started for
	// the Host in all; adopted whether it was adopted after the loss.
	starts  int
	adopted bool
}

// Ironic is killed and its database deleted while Hosts are in every state a Host can be
// in — Inspecting, Deploying, waiting for a deploy slot, Deprovisioning, Provisioned (also
// rebuilt and rebooted), Available, claimed or re-claimed while Ironic is down — with and
// without their status cleared as well (a cluster restored from a backup without status).
// Each ends where it should, from the Hosts' spec and deployment records alone: a
// deployment started for the Host's consumer is adopted, never deployed again; one never
// started (queued, or claimed while Ironic was down) is deployed once; a released or
// another consumer's deployment is not adopted as the Host's consumer's; an inspection
// cut short runs again on the new node. Fake hardware, with delays that hold each state
// long enough to lose Ironic's database in it: no server boots, so the deployments are
// counted at the provisioner (those it started), not on a console.
func TestIronicLosesItsDatabaseInEveryState(t *testing.T) {
	start := time.Now()
	ns := rig.NewNamespace(t, "infra")
	counter := &ironictest.Counting{}
	s := rig.StartSiteOwnIronic(t, ns, func(c *site.Config) {
		c.WrapProvisioner = counter.Wrap
		// Two deploy slots: two Hosts deploy at the loss while two wait for a slot.
		c.MaxConcurrentDeploy = 2
		// Deployments and tear-downs (two steps of 5 s each) and inspections (20 s) long
		// enough to be caught in.
		c.FakeDelays = ironic.FakeDelays{Deploy: ironic.Delay{Min: 5}, Inspect: ironic.Delay{Min: 20}}
	})
	d := serveDisk(t)
	images := map[string]*metalv1alpha1.HostImage{"x": d.Image(), "y": d.Image()}
	images["y"].Format = metalv1alpha1.ImageFormatQCOW2 // the same bytes as another image
	ctx := context.Background()
	uid := func(row string) string { return "uid-" + row }
	rows := []recoveryRow{
		{name: "provisioned", deployed: true, at: provisioner.StateActive, provisioned: true, image: "x", starts: 1, adopted: true},
		{name: "provisioned-cleared", deployed: true, at: provisioner.StateActive, clear: true, provisioned: true, image: "x", starts: 1, adopted: true},
		// Cleared while Ironic still knows it, then again after the loss; rebuilt (to y,
		// token 1) and rebooted (token r1) before: neither is done again.
		{name: "rebuilt-cleared", deployed: true, at: provisioner.StateActive, clear: true, provisioned: true, image: "y", starts: 2, adopted: true},
		{name: "deploying", at: provisioner.StateDeploying, provisioned: true, image: "x", starts: 1, adopted: true},
		{name: "deploying-cleared", at: provisioner.StateDeploying, clear: true, provisioned: true, image: "x", starts: 1, adopted: true},
		{name: "queued", at: provisioner.StateAvailable, provisioned: true, image: "x", starts: 1},
		{name: "queued-cleared", at: provisioner.StateAvailable, clear: true, provisioned: true, image: "x", starts: 1},
		{name: "deprovisioning", deployed: true, at: provisioner.StateDeleting, starts: 1},
		{name: "deprovisioning-cleared", deployed: true, at: provisioner.StateDeleting, clear: true, starts: 1},
		// Released by its consumer and claimed by another (with image y) while Ironic
		// was down: the first consumer's deployment is not adopted as the second's.
		{name: "reclaimed", deployed: true, at: provisioner.StateActive, provisioned: true, image: "y", consumer: "other-2", starts: 2},
		{name: "reclaimed-cleared", deployed: true, at: provisioner.StateActive, clear: true, provisioned: true, image: "y", consumer: "other", starts: 2},
		{name: "claimed-cleared", at: provisioner.StateAvailable, clear: true, provisioned: true, image: "x", starts: 1},
		{name: "inspecting", at: provisioner.StateInspecting},
		{name: "inspecting-cleared", at: provisioner.StateInspecting, clear: true},
		{name: "available-cleared", at: provisioner.StateAvailable, clear: true},
	}
	claim := func(name, consumer, image string) func(*metalv1alpha1.Host) {
		return func(h *metalv1alpha1.Host) {
			h.Spec.Image, h.Spec.Online = images[image].DeepCopy(), true
			h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: consumer, UID: uid(consumer)}
		}
	}
	release := func(h *metalv1alpha1.Host) { h.Spec.Image, h.Spec.ConsumerRef, h.Spec.Online = nil, nil, false }
	node := func(name string) (provisioner.Node, error) { return s.Provisioner.Get(ctx, ns+"~"+name) }

	// Before: every Host but the inspecting ones enrolled and Available (their hardware
	// known already, as after a restore: not inspected, which the delay makes slow), the
	// deployed ones provisioned; one rebuilt and rebooted, its status then cleared while
	// Ironic still knows it (the Host controller finds it all again from Ironic and the
	// record).
	for i, r := range rows {
		if r.at == provisioner.StateInspecting {
			continue
		}
		rig.Create(t, &metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name},
			Spec: metalv1alpha1.HardwareDataSpec{Architecture: computev1alpha1.ArchitectureAMD64, CPU: metalv1alpha1.CPU{Count: 8}, MemoryMiB: 16384}})
		h := fakeHost(ns, r.name, 7000+i)
		if r.deployed {
			claim(r.name, r.name, "x")(h)
		}
		rig.Create(t, h)
	}
	for _, r := range rows {
		switch {
		case r.deployed:
			rig.WaitHost(t, ns, r.name, "Provisioned", 3*time.Minute, metalpool.Provisioned)
		case r.at != provisioner.StateInspecting:
			rig.WaitHost(t, ns, r.name, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
		}
	}
	update(t, ns, "rebuilt-cleared", func(h *metalv1alpha1.Host) {
		h.Spec.Image = images["y"].DeepCopy()
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, metalv1alpha1.AnnotationRebuild, metalv1alpha1.RebuildToken(uid("rebuilt-cleared"), 1))
	})
	rig.WaitHost(t, ns, "rebuilt-cleared", "rebuilt", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.Image.Same(images["y"]) && h.Status.RebuildToken == metalv1alpha1.RebuildToken(uid("rebuilt-cleared"), 1)
	})
	update(t, ns, "rebuilt-cleared", func(h *metalv1alpha1.Host) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, metalv1alpha1.AnnotationReboot, "r1")
	})
	rig.WaitHost(t, ns, "rebuilt-cleared", "rebooted", time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.RebootToken == "r1"
	})
	rig.ClearStatus(t, ns, "rebuilt-cleared")
	rig.WaitHost(t, ns, "rebuilt-cleared", "Provisioned again from Ironic and its record", time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.Image.Same(images["y"]) && h.Status.RebootToken == "r1" &&
			h.Status.RebuildToken == metalv1alpha1.RebuildToken(uid("rebuilt-cleared"), 1) && h.Status.Hardware != nil
	})
	if c := counter.Snapshot(); c.Started[ns+"~rebuilt-cleared"] != 2 || c.Reboot[ns+"~rebuilt-cleared"] != 1 {
		t.Fatalf("a Host whose status was cleared was deployed or rebooted again: %d deployments started (want 2), %d reboots (want 1)",
			c.Started[ns+"~rebuilt-cleared"], c.Reboot[ns+"~rebuilt-cleared"])
	}
	t.Logf("before the loss: ready in %s", time.Since(start).Round(time.Second))

	// Into the states of the loss: inspections (new Hosts), two deployments taking both
	// slots, two more waiting for one, two tear-downs.
	for i, r := range rows {
		if r.at == provisioner.StateInspecting {
			rig.Create(t, fakeHost(ns, r.name, 7100+i))
		}
	}
	waitNodes(t, node, rows, provisioner.StateInspecting, 2*time.Minute)
	for _, r := range rows {
		switch {
		case r.at == provisioner.StateDeploying:
			update(t, ns, r.name, claim(r.name, r.name, "x"))
		case r.at == provisioner.StateDeleting:
			update(t, ns, r.name, release)
		}
	}
	waitNodes(t, node, rows, provisioner.StateDeploying, time.Minute)
	for _, r := range rows {
		if strings.HasPrefix(r.name, "queued") {
			update(t, ns, r.name, claim(r.name, r.name, "x"))
			rig.WaitHost(t, ns, r.name, "waiting for a deploy slot", time.Minute, func(h *metalv1alpha1.Host) bool {
				c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionReady)
				return c != nil && strings.Contains(c.Message, "waiting for the provisioner")
			})
		}
	}
	// The loss: every node must be where its row says, or the test proves nothing.
	before := counter.Snapshot()
	for _, r := range rows {
		n, err := node(r.name)
		if err != nil || n.State != r.at && !(r.at == provisioner.StateDeleting && n.State == provisioner.StateCleaning) {
			t.Fatalf("%s is %+v (%v) when Ironic is to lose its database, want %s: the fake delays are too short for this machine",
				r.name, n, err, r.at)
		}
	}
	restarts := s.Ironic.Restarts()
	if err := syscall.Kill(s.Ironic.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(s.Ironic.LogPath()), "ironic.db")); err != nil {
		t.Fatalf("deleting Ironic's database: %v", err)
	}
	// A Host that waited for a slot started nothing, and its record says so.
	for _, r := range rows {
		h := &metalv1alpha1.Host{}
		if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.name}, h); err != nil {
			t.Fatal(err)
		}
		if _, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]; ok != (r.deployed || r.at == provisioner.StateDeploying) {
			t.Fatalf("%s at the loss: deployment record %q, want one only on a Host whose deployment started", r.name, h.Annotations[metalv1alpha1.AnnotationDeployment])
		}
	}
	// While Ironic is down: claims and a re-claim, and the statuses cleared.
	update(t, ns, "reclaimed", claim("reclaimed", "other-2", "y"))
	update(t, ns, "reclaimed-cleared", claim("reclaimed-cleared", "other", "y"))
	update(t, ns, "claimed-cleared", claim("claimed-cleared", "claimed-cleared", "x"))
	for _, r := range rows {
		if r.clear {
			rig.ClearStatus(t, ns, r.name)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return s.Ironic.Restarts() > restarts, nil
	}); err != nil {
		t.Fatal("Ironic was not restarted after being killed")
	}
	lost := time.Now()

	for _, r := range rows {
		name := ns + "~" + r.name
		consumer := r.consumer
		if consumer == "" {
			consumer = r.name
		}
		var h *metalv1alpha1.Host
		if r.provisioned {
			h = rig.WaitHost(t, ns, r.name, "Provisioned with image "+r.image, 3*time.Minute, func(h *metalv1alpha1.Host) bool {
				n, err := node(r.name)
				return metalpool.Provisioned(h) && h.Status.Image.Same(images[r.image]) && err == nil && n.State == provisioner.StateActive && !n.Busy &&
					hostplan.SameImage(images[r.image], n.Image)
			})
			rec, err := hostplan.RecordOf(h)
			if err != nil || rec == nil || rec.Consumer != uid(consumer) || rec.Released || !rec.Image.Same(images[r.image]) {
				t.Errorf("%s: deployment record %+v (%v), want one of image %s for %s", r.name, rec, err, r.image, uid(consumer))
			}
			if h.Spec.ConsumerRef == nil || h.Spec.ConsumerRef.UID != uid(consumer) {
				t.Errorf("%s: held by %+v, want %s", r.name, h.Spec.ConsumerRef, uid(consumer))
			}
		} else {
			h = rig.WaitHost(t, ns, r.name, "Available", 3*time.Minute, func(h *metalv1alpha1.Host) bool {
				n, err := node(r.name)
				return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Status.Hardware != nil && err == nil && n.State == provisioner.StateAvailable
			})
			if _, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]; ok || h.Spec.ConsumerRef != nil {
				t.Errorf("%s: Available with consumer %+v and deployment record %q", r.name, h.Spec.ConsumerRef, h.Annotations[metalv1alpha1.AnnotationDeployment])
			}
		}
		after := counter.Snapshot()
		if after.Started[name] != r.starts {
			t.Errorf("%s: %d deployments started in all (%d before the loss), want %d", r.name, after.Started[name], before.Started[name], r.starts)
		}
		if adopted := after.Adopt[name] > before.Adopt[name]; adopted != r.adopted {
			t.Errorf("%s: adopted after the loss: %v, want %v", r.name, adopted, r.adopted)
		}
		if r.at == provisioner.StateInspecting {
			hw := &metalv1alpha1.HardwareData{}
			if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.name}, hw); err != nil || hw.Spec.CPU.Count != 8 {
				t.Errorf("%s: HardwareData %+v (%v), want the 8 CPUs of its address", r.name, hw.Spec, err)
			}
			if after.Inspect[name] < 2 {
				t.Errorf("%s: inspected %d times; the inspection Ironic lost must run again on the new node", r.name, after.Inspect[name])
			}
		}
		if r.name == "rebuilt-cleared" {
			if h.Status.RebuildToken != metalv1alpha1.RebuildToken(uid(r.name), 1) || h.Status.RebootToken != "r1" || after.Reboot[name] != 1 {
				t.Errorf("%s: rebuild token %q, reboot token %q, %d reboots; want the rebuild and the reboot carried out once, and known",
					r.name, h.Status.RebuildToken, h.Status.RebootToken, after.Reboot[name])
			}
		}
	}
	rig.CheckClaims(t, ns, nil)
	t.Logf("recovered in %s after Ironic came back; the test took %s", time.Since(lost).Round(time.Second), time.Since(start).Round(time.Second))
}

// waitNodes waits until the nodes of rows whose state at the loss is st are in it.
func waitNodes(t *testing.T, node func(string) (provisioner.Node, error), rows []recoveryRow, st provisioner.State, timeout time.Duration) {
	t.Helper()
	for _, r := range rows {
		if r.at != st {
			continue
		}
		var last provisioner.Node
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			n, err := node(r.name)
			last = n
			return err == nil && n.State == st, nil
		})
		if err != nil {
			t.Fatalf("%s never %s: %+v", r.name, st, last)
		}
	}
}
