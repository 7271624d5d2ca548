package security

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// A tenant's Machine, pinned to pool when pool is not empty.
func machine(ns, name, pool string) *computev1alpha1.Machine {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image: "registry.example/os@sha256:" + strings.Repeat("0", 64)}}
	if pool != "" {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
	}
	return m
}

// wantForbidden checks that err is the binding policy's refusal naming pool.
func wantForbidden(t *testing.T, what string, err error, pool string) {
	t.Helper()
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want the binding policy's refusal", what, err)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, "MachinePool "+pool) || !strings.Contains(msg, "bind") {
		t.Errorf("%s: %q does not name the pool and the bind verb", what, msg)
	}
}

// The attacks: a tenant pins a Machine to a pool at creation (skipping the pool's tenants
// and taints, which only the scheduler checks), or unbinds a bound Machine and binds it
// again to another pool in two updates. The API server refuses each, naming the pool;
// the scheduler's identity (the shipped anvil-manager role) still binds and unbinds.
func TestTenantCannotPinOrRebindMachines(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "tenant")
	attacker := tenant(t, "mallory", ns)
	sched := manager(t)
	pool := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "private-" + ns},
		Spec: computev1alpha1.MachinePoolSpec{
			Tenants: &computev1alpha1.TenantPolicy{Namespaces: []string{"someone-else"}},
			Taints:  []corev1.Taint{{Key: "dedicated", Value: "finance", Effect: corev1.TaintEffectNoSchedule}}}}
	create(t, env.Client, pool)

	// The tenant role works: an unpinned Machine is created.
	if err := attacker.Create(ctx, machine(ns, "plain", "")); err != nil {
		t.Fatalf("the tenant cannot create an unpinned Machine: %v", err)
	}

	// Pinned at creation. The policy may take a moment to reach the admission plugin after
	// it is installed, so the first refusal is awaited (any Machine created meanwhile is
	// the attack succeeding, and fails the test).
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err = attacker.Create(ctx, machine(ns, "pinned", pool.Name))
		return err != nil, nil
	}); werr != nil || err == nil {
		t.Fatalf("a tenant created a Machine pinned to pool %s", pool.Name)
	}
	wantForbidden(t, "create pinned", err, pool.Name)

	// Bound by the scheduler, then unbound and rebound by the tenant.
	bound := machine(ns, "bound", "")
	create(t, env.Client, bound)
	patchPool(t, sched, bound, &computev1alpha1.LocalObjectReference{Name: "open-" + ns})
	wantForbidden(t, "unbind", tryPatchPool(attacker, bound, nil), "open-"+ns)
	if err := tryPatchPool(attacker, bound, &computev1alpha1.LocalObjectReference{Name: pool.Name}); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("moving a bound Machine to another pool: %v, want a refusal", err)
	}

	// The scheduler takes a refused Machine back and binds it elsewhere.
	patchPool(t, sched, bound, nil)
	wantForbidden(t, "bind an unbound Machine", tryPatchPool(attacker, bound, &computev1alpha1.LocalObjectReference{Name: pool.Name}), pool.Name)
	patchPool(t, sched, bound, &computev1alpha1.LocalObjectReference{Name: "other-" + ns})

	// Updates that leave the binding alone stay the tenant's to make.
	got := &computev1alpha1.Machine{}
	if err := attacker.Get(ctx, client.ObjectKeyFromObject(bound), got); err != nil {
		t.Fatal(err)
	}
	got.Labels = map[string]string{"team": "a"}
	if err := attacker.Update(ctx, got); err != nil {
		t.Errorf("the tenant cannot label its bound Machine: %v", err)
	}
}

func tryPatchPool(c client.Client, m *computev1alpha1.Machine, ref *computev1alpha1.LocalObjectReference) error {
	ctx := context.Background()
	cur := &computev1alpha1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		return err
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.MachinePoolRef = ref
	return c.Patch(ctx, cur, patch)
}

func patchPool(t *testing.T, c client.Client, m *computev1alpha1.Machine, ref *computev1alpha1.LocalObjectReference) {
	t.Helper()
	if err := tryPatchPool(c, m, ref); err != nil {
		t.Fatalf("the scheduler's identity setting machinePoolRef to %v: %v", ref, err)
	}
}
