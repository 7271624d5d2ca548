package metal

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// condition returns the machine's condition of type t, or nil.
func condition(m *mriv1alpha1.Machine, t string) *mriv1alpha1.Condition {
	for _, c := range m.GetStatus().GetConditions() {
		if c.Type == t {
			return c
		}
	}
	return nil
}

// A disk that does not match its checksum fails the Host; the machine stays Pending and
// says why without naming the Host, and runs once the disk is right again.
func TestHostFailureReachesMachine(t *testing.T) {
	s := newSite(t, 1)
	img := s.images["os"]
	cache, err := osimage.NewCache(s.cacheDir, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := cache.Pull(context.Background(), img.Reference, img.Digest, computev1alpha1.ArchitectureAMD64)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(files.Disk)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(b []byte) {
		t.Helper()
		if err := os.Chmod(files.Disk, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files.Disk, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(make([]byte, len(good))) // damaged in the cache: served, but not what the Host expects
	rt := s.mustStart(t)
	id := createMachine(t, rt.Runtime, s.machine("m", s.spec("os"))).Metadata.Id
	m := await(t, rt.Runtime, id, "reported the checksum mismatch", func(m *mriv1alpha1.Machine) bool {
		c := condition(m, CondProvisioned)
		return c != nil && c.Reason == metalv1alpha1.ReasonImageChecksumMismatch
	})
	c := condition(m, CondProvisioned)
	if m.Status.State != mriv1alpha1.MachineState_MACHINE_STATE_PENDING || m.Status.ObservedGeneration == m.Metadata.Generation {
		t.Errorf("failing machine is %s at observed generation %d of %d, want Pending and unsettled", m.Status.State, m.Status.ObservedGeneration, m.Metadata.Generation)
	}
	host := s.hostOf(t, id)
	for _, leak := range []string{host.Name, s.infra, "127.0.0.1", "sha256:"} {
		if strings.Contains(c.Message, leak) {
			t.Errorf("condition message %q names %q", c.Message, leak)
		}
	}
	rewrite(good)
	await(t, rt.Runtime, id, "ran once the disk was right", isRunning)
}

// Operators deleting a Host under a machine end the machine: Terminated while the Host is
// deprovisioned and forgotten, then gone, with its config drive and tenant copy removed.
func TestHostRetired(t *testing.T) {
	s := newSite(t, 1)
	rt := s.mustStart(t)
	ctx := context.Background()
	id := createMachine(t, rt.Runtime, s.machine("m", s.spec("os"))).Metadata.Id
	await(t, rt.Runtime, id, "ran", isRunning)
	h := s.hostOf(t, id)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: s.tenant, Name: "m"}, &metalv1alpha1.HardwareData{}) == nil, nil
	}); err != nil {
		t.Fatal("no HardwareData in the tenant's namespace")
	}
	if err := env.Client.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "went away with its Host", gone)
	// What the machine left is removed after it is gone: the Host no longer says whose.
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: h.Spec.ConfigDrive.Name}},
		&metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: s.tenant, Name: "m"}},
	} {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)), nil
		})
		if err != nil {
			t.Errorf("%T %s of the retired Host's machine is still there", obj, obj.GetName())
		}
	}
}
