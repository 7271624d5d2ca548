package security

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// The attacks: pools let a Machine labelled compute.anvil.dev/image-builder onto the
// builders' network (and its registry forward), and builders live in tenants' namespaces.
// A tenant labels its own Machine so, labels an existing one, or swaps the image of a
// pending builder the manager made. Each is refused by anvil-image-builder-marker; the
// manager makes a builder, and the tenant may still annotate or delete it.
func TestTenantCannotMarkAMachineAsABuilder(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "builder-marker")
	attacker := tenant(t, "mallory", ns)
	mgr := manager(t)
	marked := func(name string) *computev1alpha1.Machine {
		m := machine(ns, name, "")
		m.Labels = map[string]string{computev1alpha1.LabelImageBuilder: "true"}
		return m
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want the marker policy's refusal", what, err)
			return
		}
		if !strings.Contains(err.Error(), "osimagebuilds") {
			t.Errorf("%s: %q does not say what the label needs", what, err)
		}
		t.Logf("refused: %s", what)
	}

	// The policy may take a moment to reach the admission plugin: the first refusal is
	// awaited (a Machine created meanwhile is the attack succeeding).
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err = attacker.Create(ctx, marked("fake-builder"))
		return err != nil, nil
	}); werr != nil || err == nil {
		t.Fatalf("a tenant created a Machine marked as an image builder")
	}
	refused("create a marked Machine", err)

	own := machine(ns, "own", "")
	if err := attacker.Create(ctx, own); err != nil {
		t.Fatalf("the tenant cannot create a plain Machine: %v", err)
	}
	own.Labels = map[string]string{computev1alpha1.LabelImageBuilder: "true"}
	refused("label its own Machine", attacker.Update(ctx, own))

	builder := marked("builder")
	if err := mgr.Create(ctx, builder); err != nil {
		t.Fatalf("the manager cannot create a builder Machine: %v", err)
	}
	got := &computev1alpha1.Machine{}
	if err := attacker.Get(ctx, client.ObjectKeyFromObject(builder), got); err != nil {
		t.Fatal(err)
	}
	swapped := got.DeepCopy()
	swapped.Spec.Image = "registry.example/mine@sha256:" + strings.Repeat("1", 64)
	refused("swap a builder's image", attacker.Update(ctx, swapped))
	unmarked := got.DeepCopy()
	delete(unmarked.Labels, computev1alpha1.LabelImageBuilder)
	refused("remove the marker", attacker.Update(ctx, unmarked))

	got.Annotations = map[string]string{"note": "metadata stays open"}
	if err := attacker.Update(ctx, got); err != nil {
		t.Errorf("the tenant cannot annotate a builder in its namespace: %v", err)
	}
	if err := attacker.Delete(ctx, got); err != nil {
		t.Errorf("the tenant cannot delete a builder in its namespace: %v", err)
	}
}
