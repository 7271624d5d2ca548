package metal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// pushDisk publishes a raw disk for amd64 and returns its reference.
func pushDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	disk := make([]byte, 1<<20)
	copy(disk, "a bare-metal disk\n")
	if err := os.WriteFile(filepath.Join(dir, osimage.DiskRawFile), disk, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := rig.Env.Registry.Host + "/metal/disk:1"
	if _, _, err := osimage.PushDirs(context.Background(), ref, map[computev1alpha1.Architecture]string{"amd64": dir}, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// A tenant's Machine gets a server: the Host is claimed, provisioned with the image's disk
// and the Machine's user data, powered off and on with the Machine, and returned to the
// pool when the Machine is deleted. A namespace no HostPolicy allows never gets one, and
// its Machine says why.
func TestTenantMachineOnBareMetal(t *testing.T) {
	ctx := context.Background()
	infra := rig.NewNamespace(t, "infra")
	allowed, denied := rig.NewNamespace(t, "tenant-a"), rig.NewNamespace(t, "tenant-b")
	const poolName = "metal-e2e"
	class := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "metal-e2e"},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
	policy := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "tenant-a"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{allowed}}}
	rig.Create(t, class, policy, fakeHost(infra, "server-1", 3001), fakeHost(infra, "server-2", 3002))
	rig.StartManager(t)
	rig.StartPool(t, poolName, infra, nil)
	for _, h := range []string{"server-1", "server-2"} {
		rig.WaitHost(t, infra, h, "Available", 2*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
	}
	image := pushDisk(t)
	installTenantRBAC(t, "alice", allowed)
	alice := as(t, "alice")

	userData := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "web-user-data"},
		Data: map[string][]byte{"userData": []byte("#cloud-config\nhostname: web\n")}}
	if err := alice.Create(ctx, userData); err != nil {
		t.Fatal(err)
	}
	web := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "web"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class.Name}, Image: image,
			UserDataRef: &computev1alpha1.SecretKeySelector{Name: userData.Name, Key: "userData"}}}
	if err := alice.Create(ctx, web); err != nil {
		t.Fatalf("alice creating her Machine: %v", err)
	}
	rig.MachineState(t, allowed, "web", "Running", 3*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})
	host := heldBy(t, infra, allowed, "web")
	if host == nil || host.Status.ProvisioningState != metalv1alpha1.StateProvisioned || host.Status.PowerState != metalv1alpha1.PowerOn {
		t.Fatalf("the Machine runs but no Host is Provisioned and on for it: %+v", host)
	}
	drive := &corev1.Secret{}
	if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: infra, Name: host.Spec.ConfigDrive.Name}, drive); err != nil {
		t.Fatalf("config drive Secret: %v", err)
	}
	if string(drive.Data["user_data"]) != string(userData.Data["userData"]) || !strings.Contains(string(drive.Data["meta_data"]), "web") {
		t.Fatalf("config drive holds user_data %q meta_data %q", drive.Data["user_data"], drive.Data["meta_data"])
	}
	hw := &metalv1alpha1.HardwareData{}
	if err := alice.Get(ctx, client.ObjectKey{Namespace: allowed, Name: "web"}, hw); err != nil {
		t.Fatalf("alice reading her server's hardware: %v", err)
	}
	if hw.Spec.CPU.Count != 8 || hw.Spec.MemoryMiB != 16384 {
		t.Errorf("her HardwareData %+v, want the server's 8 CPUs and 16384 MiB", hw.Spec)
	}

	rig.SetPower(t, allowed, "web", computev1alpha1.PowerOff)
	rig.MachineState(t, allowed, "web", "Shutdown", 2*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateShutdown
	})
	rig.WaitHost(t, infra, host.Name, "powered off", time.Minute, func(h *metalv1alpha1.Host) bool { return h.Status.PowerState == metalv1alpha1.PowerOff })
	rig.SetPower(t, allowed, "web", computev1alpha1.PowerOn)
	rig.MachineState(t, allowed, "web", "Running again", 2*time.Minute, func(m *computev1alpha1.Machine) bool {
		return m.Status.State == computev1alpha1.MachineStateRunning
	})

	// A namespace no HostPolicy names: its Machine is refused with the reason, never placed.
	other := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: denied, Name: "intruder"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class.Name}, Image: image}}
	rig.Create(t, other)
	rig.MachineState(t, denied, "intruder", "says no HostPolicy allows it", 2*time.Minute, func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "HostPolicy")
	})
	if h := heldBy(t, infra, denied, "intruder"); h != nil {
		t.Fatalf("a Machine from %s holds Host %s though no HostPolicy allows it", denied, h.Name)
	}

	if err := alice.Delete(ctx, web); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := rig.Env.Client.Get(ctx, client.ObjectKeyFromObject(web), &computev1alpha1.Machine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the Machine was not deleted: %v", err)
	}
	rig.WaitHost(t, infra, host.Name, "Available and free again", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Spec.ConsumerRef == nil && h.Status.Image == nil
	})
	if err := rig.Env.Client.Get(ctx, client.ObjectKey{Namespace: allowed, Name: "web"}, &metalv1alpha1.HardwareData{}); !apierrors.IsNotFound(err) {
		t.Errorf("her HardwareData after the Machine is gone: %v, want NotFound", err)
	}
}

// heldBy is the Host whose consumer is the Machine, or nil.
func heldBy(t *testing.T, infra, ns, name string) *metalv1alpha1.Host {
	t.Helper()
	var hosts metalv1alpha1.HostList
	if err := rig.Env.Client.List(context.Background(), &hosts, client.InNamespace(infra)); err != nil {
		t.Fatal(err)
	}
	for i := range hosts.Items {
		if c := hosts.Items[i].Spec.ConsumerRef; c != nil && c.Namespace == ns && c.Name == name {
			return &hosts.Items[i]
		}
	}
	return nil
}
