package claim_test

import (
	"context"
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
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

func startManager(t *testing.T) {
	t.Helper()
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr = "0", "0"
	o.SkipControllerNameValidation = true
	o.ImageArchitectures = manager.ImageArchitecturesAny // the tests' images name no real registry
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func withVolume(ns, name, volume string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image:           "registry.example/os:1",
			Volumes:         []computev1alpha1.MachineVolume{{Name: "data", VolumeRef: &computev1alpha1.LocalObjectReference{Name: volume}}},
			NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{Name: "eth0",
				NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "nic-" + name}}},
		},
	}
}

func condition(t *testing.T, key client.ObjectKey, typ, reason, msg string) {
	t.Helper()
	var last []metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, key, m); err != nil {
			return false, err
		}
		last = m.Status.Conditions
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, msg), nil
	})
	if err != nil {
		t.Fatalf("Machine %s: no %s condition with reason %s and message %q; conditions %+v", key, typ, reason, msg, last)
	}
}

func holder(t *testing.T, key client.ObjectKey, want string) {
	t.Helper()
	v := &computev1alpha1.Volume{}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, key, v); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return v.Status.ClaimRef != nil && v.Status.ClaimRef.Name == want, nil
	})
	if err != nil {
		t.Fatalf("Volume %s never held by %s; status %+v", key, want, v.Status)
	}
}

// Two Machines want one Volume: the first holds it, the second is refused with a
// condition naming the holder, and gets the Volume once the first is gone.
func TestOneVolumeOneMachine(t *testing.T) {
	startManager(t)
	ns := "claims"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&computev1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: computev1alpha1.VolumeSpec{Size: resource.MustParse("10Gi")}},
		&computev1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nic-first"},
			Spec: computev1alpha1.NetworkInterfaceSpec{Network: "default"}},
		withVolume(ns, "first", "shared"))
	first := client.ObjectKey{Namespace: ns, Name: "first"}
	holder(t, client.ObjectKey{Namespace: ns, Name: "shared"}, "first")
	// Claimed, and nothing attaches it until a pool does: the condition says so.
	condition(t, first, computev1alpha1.ConditionVolumesReady, "Attaching", "waiting for the pool to attach data")
	condition(t, first, computev1alpha1.ConditionNetworkInterfacesReady, "Attaching", "eth0")

	time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second resolution
	create(t, withVolume(ns, "second", "shared"))
	second := client.ObjectKey{Namespace: ns, Name: "second"}
	condition(t, second, computev1alpha1.ConditionVolumesReady, "InUseByAnotherMachine", "Volume shared is held by Machine first")
	condition(t, second, computev1alpha1.ConditionNetworkInterfacesReady, "NotFound", "NetworkInterface nic-second does not exist")

	if err := env.Client.Delete(context.Background(), &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}); err != nil {
		t.Fatal(err)
	}
	holder(t, client.ObjectKey{Namespace: ns, Name: "shared"}, "second")
	condition(t, second, computev1alpha1.ConditionVolumesReady, "Attaching", "data")
}

// Ephemeral templates become objects owned by their Machine, held by it, and deleted with it.
func TestEphemeralObjectsLiveAndDieWithTheirMachine(t *testing.T) {
	startManager(t)
	ns := "ephemeral"
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm"},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image:           "registry.example/os:1",
			Volumes: []computev1alpha1.MachineVolume{{Name: "scratch", Ephemeral: &computev1alpha1.EphemeralVolumeSource{
				VolumeTemplate: computev1alpha1.VolumeTemplate{Labels: map[string]string{"kind": "scratch"},
					Spec: computev1alpha1.VolumeSpec{Size: resource.MustParse("5Gi")}}}}},
			NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{Name: "eth0", Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{
				NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{Spec: computev1alpha1.NetworkInterfaceSpec{Network: "default"}}}}},
		},
	}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, m)
	key := client.ObjectKey{Namespace: ns, Name: "vm-scratch"}
	holder(t, key, "vm")
	v := &computev1alpha1.Volume{}
	if err := env.Client.Get(context.Background(), key, v); err != nil {
		t.Fatal(err)
	}
	if len(v.OwnerReferences) != 1 || v.OwnerReferences[0].UID != m.UID || v.Labels["kind"] != "scratch" || v.Spec.Size.String() != "5Gi" {
		t.Fatalf("ephemeral Volume not made from the template and owned by the Machine: %+v", v.ObjectMeta)
	}
	condition(t, client.ObjectKeyFromObject(m), computev1alpha1.ConditionNetworkInterfacesReady, "Attaching", "eth0")

	if err := env.Client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vErr := env.Client.Get(ctx, key, &computev1alpha1.Volume{})
		nErr := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm-eth0"}, &computev1alpha1.NetworkInterface{})
		return apierrors.IsNotFound(vErr) && apierrors.IsNotFound(nErr), nil
	})
	if err != nil {
		t.Fatal("ephemeral Volume and NetworkInterface outlived their Machine")
	}
}
