package metal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// A Host goes from enrolment to Available, is provisioned with an image and a config
// drive, powered off and on, deprovisioned and is Available again; deleting it makes
// Ironic forget it.
func TestHostLifecycle(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	s := rig.StartSite(t, ns, nil)
	d := serveDisk(t)
	ctx := context.Background()
	h := fakeHost(ns, "server-1", 1)
	rig.Create(t, h)

	got := rig.WaitHost(t, ns, h.Name, "Available", 90*time.Second, metalpool.InState(metalv1alpha1.StateAvailable))
	if got.Status.Hardware == nil || got.Status.ProvisionerID == "" {
		t.Fatalf("Available without hardware summary or provisioner id: %+v", got.Status)
	}
	hw := &metalv1alpha1.HardwareData{}
	if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: h.Name}, hw); err != nil {
		t.Fatalf("HardwareData after inspection: %v", err)
	}
	if hw.Spec.Architecture != "amd64" || hw.Spec.CPU.Count != 8 || hw.Spec.MemoryMiB != 16384 {
		t.Errorf("HardwareData %+v, want amd64 with the 8 CPUs and 16384 MiB its fake:// address gives", hw.Spec)
	}

	drive := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-1-configdrive"},
		Data: map[string][]byte{"user_data": []byte("#cloud-config\nhostname: web\n"), "meta_data": []byte(`{"hostname":"web","uuid":"u-1"}`)}}
	rig.Create(t, drive)
	update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
		h.Spec.Image = d.Image()
		h.Spec.ConfigDrive = &metalv1alpha1.SecretReference{Name: drive.Name}
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: "web", UID: "u-1"}
		h.Spec.Online = true
	})
	got = rig.WaitHost(t, ns, h.Name, "Provisioned and on", 90*time.Second, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.PowerState == metalv1alpha1.PowerOn
	})
	if got.Status.Image.Checksum != d.Checksum() {
		t.Fatalf("provisioned with %+v, want checksum %s", got.Status.Image, d.Checksum())
	}
	node, err := s.Provisioner.Get(ctx, provisioner.NodeName(client.ObjectKeyFromObject(got)))
	if err != nil || node.State != provisioner.StateActive || node.Image.Checksum != d.Checksum() {
		t.Fatalf("Ironic's node: %+v, %v; want Active with the image", node, err)
	}

	update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Online = false })
	rig.WaitHost(t, ns, h.Name, "powered off", 60*time.Second, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.PowerState == metalv1alpha1.PowerOff
	})
	update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Online = true })
	rig.WaitHost(t, ns, h.Name, "powered on again", 60*time.Second, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.PowerState == metalv1alpha1.PowerOn
	})

	update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, metalv1alpha1.AnnotationReboot, "token-1")
	})
	rig.WaitHost(t, ns, h.Name, "rebooted once for token-1", 60*time.Second, func(h *metalv1alpha1.Host) bool {
		return metalpool.Provisioned(h) && h.Status.RebootToken == "token-1" && h.Status.PowerState == metalv1alpha1.PowerOn
	})

	update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
		h.Spec.Image, h.Spec.ConfigDrive, h.Spec.ConsumerRef, h.Spec.Online = nil, nil, nil, false
	})
	got = rig.WaitHost(t, ns, h.Name, "Available after deprovisioning", 90*time.Second, func(h *metalv1alpha1.Host) bool {
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Status.Image == nil
	})

	if err := rig.Env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := rig.Env.Client.Get(ctx, client.ObjectKeyFromObject(got), &metalv1alpha1.Host{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Host not gone after delete: %v", err)
	}
	if _, err := s.Provisioner.Get(ctx, provisioner.NodeName(client.ObjectKeyFromObject(got))); !errors.Is(err, provisioner.ErrNotFound) {
		t.Fatalf("Ironic still knows the deleted Host: %v", err)
	}
	if err := rig.Env.Client.Get(ctx, client.ObjectKeyFromObject(got), &metalv1alpha1.HardwareData{}); !apierrors.IsNotFound(err) {
		t.Fatalf("HardwareData of the deleted Host: %v, want NotFound", err)
	}
}

// Ironic is killed and its database deleted while Hosts are Provisioned: the supervisor
// brings it back empty, the Host controller enrols every Host again and adopts it. No Host
// is provisioned a second time, and none stops saying Provisioned.
func TestIronicLosesItsDatabase(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	counter := &ironictest.Counting{}
	s := rig.StartSiteOwnIronic(t, ns, func(c *site.Config) { c.WrapProvisioner = counter.Wrap })
	d := serveDisk(t)
	const n = 5
	for i := 0; i < n; i++ {
		h := fakeHost(ns, fmt.Sprintf("db-%d", i), 100+i)
		h.Spec.Image, h.Spec.Online = d.Image(), true
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: h.Name, UID: h.Name}
		rig.Create(t, h)
	}
	for i := 0; i < n; i++ {
		rig.WaitHost(t, ns, fmt.Sprintf("db-%d", i), "Provisioned", 2*time.Minute, metalpool.Provisioned)
	}
	before := counter.Snapshot()

	states := watchStates(t, ns)
	pid := s.Ironic.PID()
	restarts := s.Ironic.Restarts()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(s.Ironic.LogPath()), "ironic.db")); err != nil {
		t.Fatalf("deleting Ironic's database: %v", err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return s.Ironic.Restarts() > restarts, nil
	})
	if err != nil {
		t.Fatalf("Ironic was not restarted after being killed")
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("db-%d", i)
		h := rig.WaitHost(t, ns, name, "Provisioned and adopted", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
			node, err := s.Provisioner.Get(ctx, ns+"~"+h.Name)
			return metalpool.Provisioned(h) && err == nil && node.State == provisioner.StateActive
		})
		if h.Status.Image.Checksum != d.Checksum() {
			t.Errorf("%s: image after adoption %+v", name, h.Status.Image)
		}
	}
	after := counter.Snapshot()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s~db-%d", ns, i)
		if after.Provision[name] != before.Provision[name] {
			t.Errorf("%s was provisioned again after Ironic lost its database (%d provisions before, %d after)",
				name, before.Provision[name], after.Provision[name])
		}
		if after.Adopt[name] < 1 {
			t.Errorf("%s was not adopted", name)
		}
	}
	for name, seen := range states.stop() {
		for _, st := range seen {
			if st != metalv1alpha1.StateProvisioned {
				t.Errorf("%s reported %s while Ironic recovered; a provisioned server must stay Provisioned (states seen: %v)", name, st, seen)
				break
			}
		}
	}
}

// A detached Host is forgotten by Ironic while the server keeps running; attached again it
// is adopted, not rewritten. Deleting a provisioned Host wipes the server first.
func TestDetachAndDelete(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	counter := &ironictest.Counting{}
	s := rig.StartSite(t, ns, func(c *site.Config) { c.WrapProvisioner = counter.Wrap })
	d := serveDisk(t)
	ctx := context.Background()
	h := fakeHost(ns, "detach-1", 4001)
	h.Spec.Image, h.Spec.Online = d.Image(), true
	h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: "x", UID: "x"}
	rig.Create(t, h)
	rig.WaitHost(t, ns, h.Name, "Provisioned", 2*time.Minute, metalpool.Provisioned)
	node := provisioner.NodeName(client.ObjectKeyFromObject(h))

	update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Detached = true })
	rig.WaitHost(t, ns, h.Name, "Detached", time.Minute, func(h *metalv1alpha1.Host) bool {
		_, err := s.Provisioner.Get(ctx, node)
		return h.Status.OperationalStatus == metalv1alpha1.OperationalDetached && errors.Is(err, provisioner.ErrNotFound) &&
			h.Status.ProvisioningState == metalv1alpha1.StateProvisioned
	})
	update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Detached = false })
	rig.WaitHost(t, ns, h.Name, "Provisioned again, adopted", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
		n, err := s.Provisioner.Get(ctx, node)
		return metalpool.Provisioned(h) && err == nil && n.State == provisioner.StateActive
	})
	if c := counter.Snapshot(); c.Provision[node] != 1 || c.Adopt[node] != 1 {
		t.Fatalf("after detach and attach: %d provisions, %d adoptions; want 1 and 1", c.Provision[node], c.Adopt[node])
	}

	got := &metalv1alpha1.Host{}
	if err := rig.Env.Client.Get(ctx, client.ObjectKeyFromObject(h), got); err != nil {
		t.Fatal(err)
	}
	if err := rig.Env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	states := watchStates(t, ns)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := rig.Env.Client.Get(ctx, client.ObjectKeyFromObject(h), &metalv1alpha1.Host{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("provisioned Host not gone after delete: %v", err)
	}
	if _, err := s.Provisioner.Get(ctx, node); !errors.Is(err, provisioner.ErrNotFound) {
		t.Fatalf("Ironic still knows the deleted Host: %v", err)
	}
	if c := counter.Snapshot(); c.Deprovision[node] < 1 {
		t.Fatalf("the provisioned Host was deleted without being deprovisioned (states %v)", states.stop()[h.Name])
	}
}
