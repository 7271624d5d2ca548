package extension

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// TestUpdateMachineReportsTheReimage walks one anvil Machine through a reimage as its pool
// reports it, on a real apiserver, and asks UpdateMachine at each step as Cluster API
// would. The extension reads and never writes: the anvil Machine's resourceVersion moves
// only with the test's own writes.
func TestUpdateMachineReportsTheReimage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := crd.InstallClusterAPIProvider(ctx, env.Client); err != nil {
		t.Fatalf("installing the provider's CRDs: %v", err)
	}
	const ns, name = "inplace", "md-0-abcde"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	am := &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "registry.example/os:1",
			ProviderID: "anvil://" + ns + "/" + name}}
	if err := env.Client.Create(ctx, am); err != nil {
		t.Fatal(err)
	}
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{infrav1.AnvilMachineLabel: name}},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "registry.example/os:1",
			ImageUpdatePolicy: computev1alpha1.ImageUpdatePolicyReimage, Power: computev1alpha1.PowerOn}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	setStatus := func(img string, state computev1alpha1.MachineState, reimaging *metav1.Condition) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		m.Status.ObservedGeneration = m.Generation
		m.Status.State = state
		m.Status.Image = &computev1alpha1.BootedImage{Reference: img, Digest: "sha256:0123456789012345678901234567890123456789012345678901234567890123"}
		if reimaging != nil {
			reimaging.Type, reimaging.LastTransitionTime = computev1alpha1.ConditionReimaging, metav1.Now()
			m.Status.Conditions = []metav1.Condition{*reimaging}
		}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	setStatus("registry.example/os:1", computev1alpha1.MachineStateRunning, nil)

	s := serve(t, env.Client)
	c := s.capi(t)
	// version is the anvil Machine's resourceVersion, "" once it is gone.
	version := func() string {
		t.Helper()
		got := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return got.ResourceVersion
	}
	ask := func(desiredImage string, want runtimehooksv1.ResponseStatus, inProgress bool, msg string) {
		t.Helper()
		before := version()
		desired := anvilMachineObj(name, am.Spec)
		desired.Namespace = ns
		desired.Spec.Image = desiredImage
		body, _ := json.Marshal(runtimehooksv1.UpdateMachineRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "UpdateMachineRequest"},
			Desired:  runtimehooksv1.UpdateMachineRequestObjects{InfrastructureMachine: raw(t, desired)},
		})
		var got runtimehooksv1.UpdateMachineResponse
		post(t, c, hookURL(s, hookUpdateMachine, HandlerUpdateMachine), string(body), &got)
		if got.Status != want || (got.RetryAfterSeconds > 0) != inProgress || !strings.Contains(got.Message, msg) {
			t.Fatalf("UpdateMachine: %+v, want %s (in progress: %v) saying %q", got, want, inProgress, msg)
		}
		if after := version(); after != before {
			t.Fatalf("the anvil Machine was written while UpdateMachine answered (resourceVersion %q → %q)", before, after)
		}
		t.Logf("%s: %s (retry after %d s)", got.Status, got.Message, got.RetryAfterSeconds)
	}
	const newImage = "registry.example/os:2"

	// Cluster API has written the AnvilMachine; the controller has not carried it yet.
	am.Spec.Image = newImage
	if err := env.Client.Update(ctx, am); err != nil {
		t.Fatal(err)
	}
	ask(newImage, runtimehooksv1.ResponseStatusSuccess, true, "waiting for the AnvilMachine controller")
	// The AnvilMachine controller set the anvil Machine's image; the pool reimages.
	m.Spec.Image = newImage
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	ask(newImage, runtimehooksv1.ResponseStatusSuccess, true, "to reimage it from registry.example/os:1")
	setStatus("registry.example/os:1", computev1alpha1.MachineStateRunning, &metav1.Condition{Status: metav1.ConditionTrue,
		Reason: computev1alpha1.ReasonReimaging, Message: "booting " + newImage + " in place on MachinePool p (was registry.example/os:1)"})
	ask(newImage, runtimehooksv1.ResponseStatusSuccess, true, "booting "+newImage+" in place")
	setStatus(newImage, computev1alpha1.MachineStateRunning, &metav1.Condition{Status: metav1.ConditionFalse,
		Reason: computev1alpha1.ReasonReimaged, Message: "running " + newImage})
	ask(newImage, runtimehooksv1.ResponseStatusSuccess, false, "runs "+newImage)
	ask(newImage, runtimehooksv1.ResponseStatusSuccess, false, "runs "+newImage) // idempotent

	// A next image the pool refuses: the update fails, with the pool's words.
	const refused = "registry.example/os:3"
	am.Spec.Image = refused
	if err := env.Client.Update(ctx, am); err != nil {
		t.Fatal(err)
	}
	m.Spec.Image = refused
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	setStatus(newImage, computev1alpha1.MachineStateRunning, &metav1.Condition{Status: metav1.ConditionFalse,
		Reason: computev1alpha1.ReasonReimageRefused, Message: "MachinePool p refused image " + refused + ": no arm64 entry; the machine keeps running " + newImage})
	ask(refused, runtimehooksv1.ResponseStatusFailure, false, "refused image "+refused)

	// The anvil Machine is gone, then the AnvilMachine.
	if err := env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, m)
	ask(refused, runtimehooksv1.ResponseStatusFailure, false, "is gone")
	if err := env.Client.Delete(ctx, am); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, am)
	ask(refused, runtimehooksv1.ResponseStatusFailure, false, "AnvilMachine "+ns+"/"+name+" not found")
}

func waitGone(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	for {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still there: finalizers %v", obj.GetName(), obj.GetFinalizers())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
