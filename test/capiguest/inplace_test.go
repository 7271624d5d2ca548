package capiguest_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/nodeagent"
	"github.com/anvil-dev/anvil/test/nodeagent/nodeimage"
)

// In-place updates on a real guest: with Cluster API's InPlaceUpdates gate on (the
// rig runs its manager so) and anvil's update extension registered, a MachineDeployment of
// one amd64 VM pointed at a template with a second node image keeps its Machine: the same
// Cluster API Machine and the same anvil Machine on the same pool are reimaged, the guest
// boots the second image (its console prints that image's identity line, which the first
// image lacks), its agent takes its Node over again, and the Machine is healthy and
// up to date. The gate-off path (the Machines replaced) is covered on the fake pool by
// test/capi's TestImageChangeInPlaceOrByReplacement.
func TestInPlaceReimagesTheGuest(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	ctx := context.Background()
	start := time.Now()
	image2, identity := pushSecondNodeImage(t, r)
	capienv.RegisterExtension(t, env.Config, r.extension)
	t.Logf("second node image pushed and the extension discovered in %s", time.Since(start).Round(100*time.Millisecond))

	amd64 := computev1alpha1.ArchitectureAMD64
	md, tmpl := capienv.MachineDeployment(c.Cluster, "inplace", bootstrapSecret, "", r.machineSpec(amd64), 1)
	if err := capienv.Create(ctx, env.Client, tmpl, md); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), md) }) // its VM's CPU is the next test's
	capienv.RollInPlaceFirst(t, env.Client, md)
	before := waitHealthy(t, md, 1)[0]
	g := assertGuestNode(t, r, &before, amd64)
	if strings.Contains(g.console, identity) {
		t.Fatalf("the first node image's guest printed the second image's %q", identity)
	}
	capienv.StandInBootstrapProvider(t, env.Client, &before)

	rolled := time.Now()
	capienv.RollTo(t, env.Client, md, image2)
	var after clusterv1.Machine
	capienv.Eventually(t, bootTimeout, "the same Machine reimaged to the second image, healthy and up to date", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil {
			return err
		}
		if len(machines) != 1 {
			return fmt.Errorf("%d Machines", len(machines))
		}
		after = machines[0]
		if after.UID != before.UID {
			return fmt.Errorf("replaced: %s → %s", before.Name, after.Name)
		}
		if err := capienv.Healthy(&after); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(after.Status.Conditions, clusterv1.MachineUpToDateCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Machine UpToDate %+v", c)
		}
		anvil := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g.anvil), anvil); err != nil {
			return err
		}
		if anvil.Spec.Image != image2 || anvil.Status.Image == nil || anvil.Status.Image.Reference != image2 {
			return fmt.Errorf("anvil Machine %s: spec image %s, booted %+v; want %s", anvil.Name, anvil.Spec.Image, anvil.Status.Image, image2)
		}
		return nil
	})
	t.Logf("UpdateMachine done, the Machine healthy and up to date %s after the rollout", time.Since(rolled).Round(100*time.Millisecond))

	// Cluster API counts the update done once the anvil Machine runs the new image, and the
	// Machine healthy from the Node as the first boot left it (Ready until the grace period
	// passes without a heartbeat): the new image's agent registers some seconds later. Its
	// Node then reports the second boot's boot ID.
	ready := "ANVIL-TESTOS-READY "
	registered := nodeagent.RegisteredLine(g.node.Name, g.node.Spec.ProviderID)
	capienv.Eventually(t, bootTimeout, "the second image's guest to register its Node again", func() error {
		raw, err := os.ReadFile(g.consoleLog())
		if err != nil {
			return err
		}
		console := string(raw)
		if n := strings.Count(console, ready); n != 2 {
			return fmt.Errorf("the console shows %d boots", n)
		}
		if !strings.Contains(console[strings.LastIndex(console, ready):], registered) {
			return fmt.Errorf("the second boot printed no %q yet", registered)
		}
		n := &corev1.Node{}
		if err := r.workloadClient.Get(ctx, client.ObjectKeyFromObject(g.node), n); err != nil {
			return err
		}
		if n.Status.NodeInfo.BootID == g.node.Status.NodeInfo.BootID {
			return fmt.Errorf("Node %s still reports the first boot's ID %s", n.Name, n.Status.NodeInfo.BootID)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&after), &after); err != nil {
			return err
		}
		return capienv.Healthy(&after)
	})
	t.Logf("the Node registered again by the second image's guest %s after the rollout", time.Since(rolled).Round(100*time.Millisecond))

	// The same anvil Machine, on the same pool, in the same VM folder; its guest booted twice,
	// the second time the new image, whose agent took its Node over.
	h := assertGuestNode(t, r, &after, amd64)
	if h.anvil.UID != g.anvil.UID || h.anvil.Status.Pool != g.anvil.Status.Pool || h.dir != g.dir {
		t.Errorf("anvil Machine %s: UID %s on %s (VM folder %s) before, %s on %s (VM folder %s) after: not reimaged in place",
			g.anvil.Name, g.anvil.UID, g.anvil.Status.Pool, g.dir, h.anvil.UID, h.anvil.Status.Pool, h.dir)
	}
	if h.node.UID != g.node.UID {
		t.Errorf("Node %s was made anew (UID %s, before %s): the agent should take its earlier boot's Node over", h.node.Name, h.node.UID, g.node.UID)
	}
	if cond := apimeta.FindStatusCondition(h.anvil.Status.Conditions, computev1alpha1.ConditionReimaging); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != computev1alpha1.ReasonReimaged {
		t.Errorf("anvil Machine %s Reimaging %+v, want False %s", h.anvil.Name, cond, computev1alpha1.ReasonReimaged)
	}
	if n := capienv.Events(t, env.Client, h.anvil.Namespace, "Machine", h.anvil.Name, computev1alpha1.ReasonReimaging); n == 0 {
		t.Errorf("anvil Machine %s has %d %s Events, want one", h.anvil.Name, n, computev1alpha1.ReasonReimaging)
	}
	if n := strings.Count(h.console, ready); n != 2 {
		t.Fatalf("the console of %s shows %d boots, want 2:\n%s", h.anvil.Name, n, h.console)
	}
	second := h.console[strings.LastIndex(h.console, ready):]
	for _, want := range []string{identity, registered, "taking it over"} {
		if !strings.Contains(second, want) {
			t.Errorf("the second boot of %s printed no %q:\n%s", h.anvil.Name, want, second)
		}
	}
	t.Logf("the whole test took %s", time.Since(start).Round(100*time.Millisecond))
}

// pushSecondNodeImage publishes a node image that differs from the rig's by one file: the
// test OS prints /etc/anvil/build at boot (where an image built by anvil says how it was
// built), and this image's holds an identity line, which it returns with the pinned
// reference. The file goes in as one more archive after the test OS's initramfs, as the
// agent does (the kernel unpacks concatenated archives in order).
func pushSecondNodeImage(t testing.TB, r *rig) (image, identity string) {
	t.Helper()
	identity = "anvil-node-image=second"
	extra := t.TempDir()
	if err := os.MkdirAll(filepath.Join(extra, "etc", "anvil"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(extra, "etc", "anvil", "build"), []byte(identity+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	osDir := t.TempDir()
	for _, a := range archs {
		from, to := filepath.Join(r.osDir, string(a)), filepath.Join(osDir, string(a))
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"kernel", "cmdline", "initramfs"} {
			raw, err := os.ReadFile(filepath.Join(from, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, f), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := appendArchive(filepath.Join(to, "initramfs"), extra); err != nil {
			t.Fatal(err)
		}
	}
	image, err := nodeimage.Push(context.Background(), env.Registry.Host+"/capiguest/node:second", osDir, r.agents)
	if err != nil {
		t.Fatal(err)
	}
	if image == r.image {
		t.Fatalf("the second node image has the first one's reference %s", image)
	}
	return image, identity
}

// appendArchive appends dir to the initramfs file as a gzipped newc archive.
func appendArchive(initramfs, dir string) error {
	f, err := os.OpenFile(initramfs, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	err = buildagent.Pack(zw, dir, 0)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
